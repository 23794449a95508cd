/** The browser options the pool would refuse, checked before anything is created: the same answer at POST /browsers and POST …/runs. */
import { RemoteError, Status } from '../../services/common/src/errors.js';
import type { RouteContext } from './routes/route.js';
import { RequestValidationError } from './validation.js';

export interface BrowserOptions {
  profileId?: string | undefined;
  proxyCountryCode?: string | undefined;
  timezone?: string | undefined;
}

/**
 * Refuses a run whose task names a URL outside its browser's `allowed_domains` (422 at the task):
 * the browser could never open it. Same matching as the pool's egress proxy: `example.com` is that
 * host, `*.example.com` it and every subdomain.
 */
export function checkTaskInsideDomains(task: string, patterns: readonly string[] | undefined): void {
  if (!patterns?.length) return;
  const lower = patterns.map((p) => p.toLowerCase());
  for (const [raw] of task.matchAll(/\bhttps?:\/\/[^\s<>"')\]]+/gi)) {
    let host: string;
    try {
      host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
    } catch {
      continue;
    }
    if (!lower.some((p) => (p.startsWith('*.') ? host === p.slice(2) || host.endsWith(p.slice(1)) : host === p))) {
      throw new RequestValidationError([{ type: 'value_error', loc: ['body', 'task'], msg: `Value error, the task names ${host}, which is outside browser.allowed_domains`, input: raw }]);
    }
  }
}

let timezones: Set<string> | undefined;
/** True for an IANA time zone name this runtime (and so the browser's ICU) knows. */
function knownTimezone(name: string): boolean {
  timezones ??= new Set([...Intl.supportedValuesOf('timeZone'), 'UTC', 'Etc/UTC']);
  return timezones.has(name);
}

/**
 * Refuses an unknown, foreign or deleted profile (404 "Profile not found", from the pool) and a
 * proxy country with no configured proxy (422 at `proxyLoc`) and a timezone that is no IANA name (422 beside it). With `poolDown: 'allow'` an
 * unreachable pool lets the request through: a run's browser starts later, and the pool checks then.
 */
export async function checkBrowserOptions(ctx: RouteContext, o: BrowserOptions, proxyLoc: (string | number)[], poolDown: 'allow' | 'refuse'): Promise<void> {
  if (o.timezone !== undefined && !knownTimezone(o.timezone)) {
    // A run's browser starts later: an unknown zone must be refused now, not fail the run then.
    throw new RequestValidationError([{ type: 'value_error', loc: [...proxyLoc.slice(0, -1), 'timezone'], msg: 'Value error, timezone must be an IANA time zone name such as Europe/Berlin', input: o.timezone }]);
  }
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
