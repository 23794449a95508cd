/**
 * Live view tokens: scoped to one browser of one project and one mode (interactive or
 * view-only), expiring, and opaque. The mode, project id and expiry travel encrypted and
 * authenticated (AES-256-GCM under a key derived from the signing secret), bound to the browser
 * id, which travels in the path: a holder learns nothing from the token, and a token changed in
 * any way, or used for another browser, is refused. The project id is inside so the service can
 * reach the browser in the pool (every pool call is per project) without a lookup of its own.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
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
const CLAIMS = /^(interactive|view)\.([A-Za-z0-9_-]{1,64})\.(\d{1,12})$/;
const TOKEN = /^[A-Za-z0-9_-]{40,200}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

const keys = new WeakMap<Signer, Buffer>();

/** The token key: the signing secret's MAC of a fixed label (the secret itself never leaves the Signer), derived once per Signer. */
function key(signer: Signer): Buffer {
  let k = keys.get(signer);
  if (!k) keys.set(signer, (k = Buffer.from(signer.sign(['live-view', 'token-key', 'v1'], 0), 'base64url')));
  return k;
}

const aad = (browserId: string) => Buffer.from(`live-view|${browserId}`);

export function mintLiveViewToken(signer: Signer, projectId: string, browserId: string, mode: LiveViewMode, ttlSeconds: number): { token: string; expiresAtSec: number } {
  if (!PROJECT_ID.test(projectId)) throw new Error('project id cannot travel in a live view token');
  const exp = signer.expiry(ttlSeconds);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key(signer), iv).setAAD(aad(browserId));
  const sealed = Buffer.concat([cipher.update(`${mode}.${projectId}.${exp}`, 'utf8'), cipher.final()]);
  return { token: Buffer.concat([iv, sealed, cipher.getAuthTag()]).toString('base64url'), expiresAtSec: exp };
}

/** The token's grant when it is valid for this browser; otherwise why not. */
export function verifyLiveViewToken(signer: Signer, browserId: string, token: string): TokenVerdict {
  if (!TOKEN.test(token)) return { ok: false, reason: 'invalid' };
  const raw = Buffer.from(token, 'base64url');
  if (raw.length <= IV_BYTES + TAG_BYTES || raw.toString('base64url') !== token) return { ok: false, reason: 'invalid' };
  let claims: string;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key(signer), raw.subarray(0, IV_BYTES)).setAAD(aad(browserId));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    claims = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return { ok: false, reason: 'invalid' };
  }
  const m = CLAIMS.exec(claims);
  if (!m) return { ok: false, reason: 'invalid' };
  const exp = Number(m[3]);
  if (exp * 1000 <= signer.now()) return { ok: false, reason: 'expired' };
  return { ok: true, mode: m[1] as LiveViewMode, projectId: m[2]!, expiresAtSec: exp };
}

export function liveViewUrl(baseUrl: string, browserId: string, token: string): string {
  return `${baseUrl}/browsers/${encodeURIComponent(browserId)}?token=${token}`;
}
