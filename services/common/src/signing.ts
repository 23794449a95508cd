/**
 * HMAC-SHA256 signatures for presigned links and tokens: scoped (the signed parts name the
 * method, resource and options) and expiring. The clock is injectable so expiry is testable.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export type Verdict = 'ok' | 'expired' | 'invalid';

export class Signer {
  readonly #secret: Buffer;
  readonly now: () => number;

  constructor(secret: string | Buffer, now: () => number = Date.now) {
    this.#secret = Buffer.isBuffer(secret) ? secret : Buffer.from(secret, 'utf8');
    this.now = now;
  }

  #mac(parts: string[], expiresAtSec: number): Buffer {
    const h = createHmac('sha256', this.#secret);
    for (const p of parts) h.update(`${p.length}:${p}|`); // length-prefixed: no two part lists collide
    h.update(String(expiresAtSec));
    return h.digest();
  }

  /** A base64url signature of `parts` valid until `expiresAtSec` (unix seconds). */
  sign(parts: string[], expiresAtSec: number): string {
    return this.#mac(parts, expiresAtSec).toString('base64url');
  }

  /** Unix seconds `ttlSeconds` from now. */
  expiry(ttlSeconds: number): number {
    return Math.floor(this.now() / 1000) + ttlSeconds;
  }

  verify(parts: string[], expiresAtSec: number, signature: string): Verdict {
    if (!Number.isInteger(expiresAtSec) || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return 'invalid';
    const given = Buffer.from(signature, 'base64url');
    // Only the canonical encoding: the last character's two padding bits must not make a second valid form.
    if (given.length !== 32 || given.toString('base64url') !== signature) return 'invalid';
    if (!timingSafeEqual(given, this.#mac(parts, expiresAtSec))) return 'invalid';
    return expiresAtSec * 1000 <= this.now() ? 'expired' : 'ok';
  }
}

/**
 * The signing secret: SIGNING_SECRET when given (shared by replicas), else one generated once
 * and kept (mode 0600) in the service's data directory.
 */
export function loadSigningSecret(configured: string | undefined, dataDir: string, service: string): string {
  if (configured) return configured;
  const file = path.join(dataDir, service, 'signing-secret');
  try {
    const s = fs.readFileSync(file, 'utf8').trim();
    if (s.length >= 32) return s;
  } catch {
    /* first start */
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  fs.writeFileSync(file, secret, { mode: 0o600 });
  return secret;
}
