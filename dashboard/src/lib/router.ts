/**
 * The dashboard's addresses: hash routes (`#/runs/browser-agent/run_…`), so the gateway serves one
 * page at `/` and its own paths (/api/v1, /healthz, /openapi.json) stay untouched (pure).
 */

export type Route =
  | { page: 'overview' }
  | { page: 'runs'; agent?: string; status?: string; session?: string }
  | { page: 'new-run'; agent?: string; session?: string; workspace?: string }
  | { page: 'run'; agent: string; id: string }
  | { page: 'browsers' }
  | { page: 'browser'; id: string }
  | { page: 'profiles' }
  | { page: 'workspaces' }
  | { page: 'workspace'; id: string }
  | { page: 'not-found'; path: string };

const decode = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

function query(q: URLSearchParams, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = q.get(n);
    if (v) out[n] = v;
  }
  return out;
}

/** The route of a location hash (`#/runs?status=running`); an empty hash is the runs list. */
export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/runs';
  const [pathPart = '', queryPart = ''] = raw.split('?', 2);
  const parts = pathPart.split('/').filter(Boolean).map(decode);
  const q = new URLSearchParams(queryPart);
  const [a, b, c] = parts;
  if (parts.length === 0) return { page: 'runs' };
  if (a === 'overview' && parts.length === 1) return { page: 'overview' };
  if (a === 'runs') {
    if (parts.length === 1) return { page: 'runs', ...query(q, ['agent', 'status', 'session']) };
    if (b === 'new' && parts.length === 2) return { page: 'new-run', ...query(q, ['agent', 'session', 'workspace']) };
    if (b && c && parts.length === 3) return { page: 'run', agent: b, id: c };
  }
  if (a === 'browsers') {
    if (parts.length === 1) return { page: 'browsers' };
    if (b && parts.length === 2) return { page: 'browser', id: b };
  }
  if (a === 'profiles' && parts.length === 1) return { page: 'profiles' };
  if (a === 'workspaces') {
    if (parts.length === 1) return { page: 'workspaces' };
    if (b && parts.length === 2) return { page: 'workspace', id: b };
  }
  return { page: 'not-found', path: raw };
}

/** The hash of a route (the inverse of parseHash). */
export function href(route: Route): string {
  const e = encodeURIComponent;
  const withQuery = (path: string, params: Record<string, string | undefined>): string => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    const s = q.toString();
    return `#${path}${s ? `?${s}` : ''}`;
  };
  switch (route.page) {
    case 'overview':
      return '#/overview';
    case 'runs':
      return withQuery('/runs', { agent: route.agent, status: route.status, session: route.session });
    case 'new-run':
      return withQuery('/runs/new', { agent: route.agent, session: route.session, workspace: route.workspace });
    case 'run':
      return `#/runs/${e(route.agent)}/${e(route.id)}`;
    case 'browsers':
      return '#/browsers';
    case 'browser':
      return `#/browsers/${e(route.id)}`;
    case 'profiles':
      return '#/profiles';
    case 'workspaces':
      return '#/workspaces';
    case 'workspace':
      return `#/workspaces/${e(route.id)}`;
    case 'not-found':
      return `#${route.path}`;
  }
}
