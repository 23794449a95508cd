/**
 * Verifying a webhook delivery (Standard Webhooks): the HMAC-SHA256, keyed with the secret's
 * base64 bytes, of `${webhook-id}.${webhook-timestamp}.${body}` must match one of the `v1,`
 * signatures, and the timestamp must be recent (a replayed delivery is refused). WebCrypto, so it
 * runs in Node ≥ 20 and browsers alike.
 */
import { AgentTaskServiceError } from './errors.js';

/** A delivery that is not signed by the secret, or not recently. */
export class WebhookVerificationError extends AgentTaskServiceError {}

export interface VerifyWebhookOptions {
  /** How far the timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The time to compare with (tests). */
  now?: Date;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(h: HeaderSource, name: string): string {
  const v = h instanceof Headers ? h.get(name) : (h[name] ?? h[name.toLowerCase()]);
  const s = Array.isArray(v) ? v[0] : v;
  if (!s) throw new WebhookVerificationError(`missing ${name} header`);
  return s;
}

const fromBase64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const toBase64 = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b)));

/** Equal strings, in time that does not depend on where they differ. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Checks a delivery's signature with the endpoint's `whsec_…` secret and returns the parsed event
 * (`{id, type, createdAt, data}`); throws WebhookVerificationError otherwise. Pass the raw body,
 * exactly as received.
 */
export async function verifyWebhook<T = { id: string; type: string; createdAt: string; data: Record<string, unknown> }>(
  secret: string,
  body: string,
  headers: HeaderSource,
  options: VerifyWebhookOptions = {},
): Promise<T> {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  const seconds = Number(ts);
  const now = (options.now ?? new Date()).getTime() / 1000;
  if (!/^\d+$/.test(ts) || Math.abs(now - seconds) > (options.toleranceSeconds ?? 300)) throw new WebhookVerificationError('webhook-timestamp is not recent');
  const key = await crypto.subtle.importKey('raw', fromBase64(secret.replace(/^whsec_/, '')), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const expected = toBase64(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${id}.${ts}.${body}`)));
  const ok = signatures.split(' ').some((s) => s.startsWith('v1,') && sameText(s.slice(3), expected));
  if (!ok) throw new WebhookVerificationError('no webhook-signature matches the secret');
  return JSON.parse(body) as T;
}
