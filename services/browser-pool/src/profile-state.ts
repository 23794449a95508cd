/**
 * Profile state over CDP: every cookie of the session's browser context, and localStorage per
 * web origin. localStorage lives in the renderer of a page of its origin, so reading or writing
 * it needs such a page: a hidden helper tab navigates to each origin with every request
 * answered locally by the Fetch domain (no network, no server sees it), then runs a script.
 */
import type { CdpConnection } from './cdp-connection.js';
import { INTERNAL_TAB_URL } from './tabs.js';

/** A cookie as CDP's Storage.setCookies takes it. */
export interface SavedCookie {
  name: string;
  value: string;
  domain: string;
  path: string;
  /** Unix seconds; absent for a session cookie. */
  expires?: number;
  httpOnly: boolean;
  secure: boolean;
  sameSite?: string;
  priority?: string;
  sourceScheme?: string;
  sourcePort?: number;
  partitionKey?: unknown;
}

/** localStorage of one origin. */
export interface OriginStorage {
  origin: string;
  localStorage: [string, string][];
}

/** What a profile keeps: cookies and localStorage per origin. */
export interface ProfileState {
  cookies: SavedCookie[];
  origins: OriginStorage[];
}


interface CdpCookie extends SavedCookie {
  session: boolean;
  partitionKeyOpaque?: boolean;
}

/** The domains the cookies belong to, without a leading dot, sorted and unique. */
export function cookieDomains(state: ProfileState): string[] {
  return [...new Set(state.cookies.map((c) => c.domain.replace(/^\./, '').toLowerCase()))].sort();
}

function toSaved(c: CdpCookie): SavedCookie {
  const out: SavedCookie = { name: c.name, value: c.value, domain: c.domain, path: c.path, httpOnly: c.httpOnly, secure: c.secure };
  if (!c.session && c.expires !== undefined && c.expires > 0) out.expires = c.expires;
  if (c.sameSite) out.sameSite = c.sameSite;
  if (c.priority) out.priority = c.priority;
  if (c.sourceScheme) out.sourceScheme = c.sourceScheme;
  if (c.sourcePort !== undefined) out.sourcePort = c.sourcePort;
  if (c.partitionKey !== undefined) out.partitionKey = c.partitionKey;
  return out;
}

const live = (c: SavedCookie, nowSec: number) => c.expires === undefined || c.expires > nowSec;

const BLANK_PAGE = Buffer.from('<!doctype html><title></title>').toString('base64');

/**
 * Runs `fn` with a hidden tab whose every request is answered with an empty page, then closes it.
 * `visit(origin)` navigates the tab to that origin and resolves once its document has loaded.
 */
async function withHelperTab<T>(conn: CdpConnection, contextId: string | undefined, timeoutMs: number, fn: (visit: (origin: string) => Promise<string>) => Promise<T>): Promise<T> {
  const { targetId } = await conn.send<{ targetId: string }>('Target.createTarget', { url: INTERNAL_TAB_URL, background: true, browserContextId: contextId });
  let off: (() => void) | undefined;
  try {
    const { sessionId } = await conn.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    off = conn.on('Fetch.requestPaused', (p: { requestId: string }, sid) => {
      if (sid !== sessionId) return;
      conn
        .send('Fetch.fulfillRequest', { requestId: p.requestId, responseCode: 200, responseHeaders: [{ name: 'Content-Type', value: 'text/html' }], body: BLANK_PAGE }, sessionId)
        .catch(() => {});
    });
    await Promise.all([conn.send('Fetch.enable', { patterns: [{ urlPattern: '*' }] }, sessionId), conn.send('Page.enable', {}, sessionId)]);
    const visit = async (origin: string) => {
      const loaded = conn.waitFor('Page.loadEventFired', (_p, sid) => sid === sessionId, timeoutMs);
      // Awaited below, unless the navigation fails first (the browser died mid-save: both reject, "connection
      // closed"); its rejection must not go unhandled then, which would end the pool process.
      loaded.catch(() => {});
      const nav = await conn.send<{ errorText?: string }>('Page.navigate', { url: `${origin}/` }, sessionId, timeoutMs);
      if (nav.errorText) throw new Error(`cannot open ${origin}: ${nav.errorText}`);
      await loaded;
      return sessionId;
    };
    return await fn(visit);
  } finally {
    off?.();
    await conn.send('Target.closeTarget', { targetId }).catch(() => {});
  }
}

async function evaluate<T>(conn: CdpConnection, sessionId: string, expression: string, timeoutMs: number): Promise<T> {
  const r = await conn.send<{ result: { value?: T }; exceptionDetails?: { text: string } }>('Runtime.evaluate', { expression, returnByValue: true }, sessionId, timeoutMs);
  if (r.exceptionDetails) throw new Error(`script failed: ${r.exceptionDetails.text}`);
  return r.result.value as T;
}

/** Loads a saved state into the browser context `contextId` (undefined: the default one): cookies first, then each origin's localStorage. */
export async function applyProfileState(conn: CdpConnection, contextId: string | undefined, state: ProfileState, timeoutMs: number): Promise<void> {
  const nowSec = Date.now() / 1000;
  const cookies = state.cookies.filter((c) => live(c, nowSec));
  if (cookies.length) await conn.send('Storage.setCookies', { cookies, browserContextId: contextId }, undefined, timeoutMs);
  const origins = state.origins.filter((o) => o.localStorage.length && /^https?:\/\//.test(o.origin));
  if (!origins.length) return;
  await withHelperTab(conn, contextId, timeoutMs, async (visit) => {
    for (const o of origins) {
      const sessionId = await visit(o.origin);
      await evaluate(conn, sessionId, `(() => { for (const [k, v] of ${JSON.stringify(o.localStorage)}) localStorage.setItem(k, v); return true; })()`, timeoutMs);
    }
  });
}

/**
 * Reads the state of the browser context `contextId` (undefined: the default one): every cookie,
 * and localStorage of each given origin (those the profile was loaded with and those the browser
 * has shown). Origins with empty storage are left out.
 */
export async function captureProfileState(conn: CdpConnection, contextId: string | undefined, origins: Iterable<string>, timeoutMs: number): Promise<ProfileState> {
  const { cookies } = await conn.send<{ cookies: CdpCookie[] }>('Storage.getCookies', { browserContextId: contextId }, undefined, timeoutMs);
  const saved = cookies.filter((c) => !c.partitionKeyOpaque).map(toSaved);
  const list = [...new Set(origins)].filter((o) => /^https?:\/\//.test(o)).sort();
  const storage: OriginStorage[] = [];
  if (list.length) {
    await withHelperTab(conn, contextId, timeoutMs, async (visit) => {
      for (const origin of list) {
        const sessionId = await visit(origin);
        const entries = await evaluate<[string, string][]>(conn, sessionId, 'Object.entries(localStorage)', timeoutMs);
        if (entries.length) storage.push({ origin, localStorage: entries });
      }
    });
  }
  return { cookies: saved, origins: storage };
}
