/**
 * Live view tokens: scoped to one browser of one project and one mode (interactive or
 * view-only), expiring, HMAC-signed. Format `<mode>.<projectId>.<exp>.<sig>`; the browser id is
 * signed but travels in the path. The project id travels in the token so the service can reach
 * the browser in the pool (every pool call is per project) without a lookup of its own.
 */
import type { Signer } from '../../common/src/signing.js';

export type LiveViewMode = 'interactive' | 'view';

export interface MintedLink {
  url: string;
  expiresAt: string;
}

/** What a valid token grants. */
export interface LiveViewGrant {
  ok: true;
  mode: LiveViewMode;
  projectId: string;
  /** Unix seconds. */
  expiresAtSec: number;
}

export type TokenVerdict = LiveViewGrant | { ok: false; reason: 'expired' | 'invalid' };

const PROJECT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const TOKEN = /^(interactive|view)\.([A-Za-z0-9_-]{1,64})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

function parts(browserId: string, projectId: string, mode: LiveViewMode): string[] {
  return ['live-view', browserId, projectId, mode];
}

export function mintLiveViewToken(signer: Signer, projectId: string, browserId: string, mode: LiveViewMode, ttlSeconds: number): { token: string; expiresAtSec: number } {
  if (!PROJECT_ID.test(projectId)) throw new Error('project id cannot travel in a live view token');
  const exp = signer.expiry(ttlSeconds);
  return { token: `${mode}.${projectId}.${exp}.${signer.sign(parts(browserId, projectId, mode), exp)}`, expiresAtSec: exp };
}

/** The token's grant when it is valid for this browser; otherwise why not. */
export function verifyLiveViewToken(signer: Signer, browserId: string, token: string): TokenVerdict {
  const m = TOKEN.exec(token);
  if (!m) return { ok: false, reason: 'invalid' };
  const mode = m[1] as LiveViewMode;
  const projectId = m[2]!;
  const exp = Number(m[3]);
  const verdict = signer.verify(parts(browserId, projectId, mode), exp, m[4]!);
  return verdict === 'ok' ? { ok: true, mode, projectId, expiresAtSec: exp } : { ok: false, reason: verdict };
}

export function liveViewUrl(baseUrl: string, browserId: string, token: string): string {
  return `${baseUrl}/browsers/${encodeURIComponent(browserId)}?token=${token}`;
}
