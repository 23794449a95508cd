/** The browser options the pool would refuse, checked before anything is created: the same answer at POST /browsers and POST …/runs. */
import { RemoteError, Status } from '../../services/common/src/errors.js';
import type { RouteContext } from './routes/route.js';
import { RequestValidationError } from './validation.js';

export interface BrowserOptions {
  profileId?: string | undefined;
  proxyCountryCode?: string | undefined;
}

/**
 * Refuses an unknown, foreign or deleted profile (404 "Profile not found", from the pool) and a
 * proxy country with no configured proxy (422 at `proxyLoc`). With `poolDown: 'allow'` an
 * unreachable pool lets the request through: a run's browser starts later, and the pool checks then.
 */
export async function checkBrowserOptions(ctx: RouteContext, o: BrowserOptions, proxyLoc: (string | number)[], poolDown: 'allow' | 'refuse'): Promise<void> {
  if (!o.profileId && !o.proxyCountryCode) return;
  let problem: string | undefined;
  try {
    const res = await ctx.clients.browserPool.api.checkBrowserOptions({ projectId: ctx.projectId, profileId: o.profileId, proxyCountryCode: o.proxyCountryCode }, { requestId: ctx.requestId });
    problem = res.proxyCountryCodeProblem;
  } catch (err) {
    const down = err instanceof RemoteError && (err.code === Status.UNAVAILABLE || err.code === Status.DEADLINE_EXCEEDED);
    if (down && poolDown === 'allow') return;
    throw err;
  }
  if (problem) throw new RequestValidationError([{ type: 'value_error', loc: proxyLoc, msg: `Value error, ${problem}`, input: o.proxyCountryCode }]);
}
