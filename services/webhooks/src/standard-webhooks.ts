/**
 * Signing per Standard Webhooks (standardwebhooks.com): the signature is HMAC-SHA256, keyed with
 * the secret's base64 bytes, over `${id}.${timestamp}.${body}`, sent as `v1,<base64>`; several
 * (during a secret rotation) are separated by spaces. Any Standard Webhooks library verifies it.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

/** A new secret: `whsec_` and 32 random bytes in base64. */
export function newSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The `v1,<base64>` signature of one message with one secret. */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The three headers of a delivery, signed with every secret given. */
export function signedHeaders(secrets: string[], id: string, body: string, now = new Date()): Record<string, string> {
  const ts = Math.floor(now.getTime() / 1000);
  return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': secrets.map((s) => sign(s, id, ts, body)).join(' ') };
}
