/**
 * `Idempotency-Key` on every POST (draft-ietf-httpapi-idempotency-key-header, as Stripe does):
 * the first request with a key does the work and its response is stored for the project; a
 * retry with the same key and the same request (method, path, body) gets that response back
 * without the work being done again — also while the first is still working (the retry waits
 * for it, then 409 if it takes too long); the same key on another request is a 422.
 */
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpError, renderError } from './http-errors.js';
import type { IdempotencyRepository, StoredResponse } from './idempotency.repository.js';

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Set on a replayed response, so a client can tell a replay from the first answer. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';

/** Printable ASCII, as the draft's sf-string allows; Stripe's limit of 255 characters. */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;
/** How often a waiting retry looks at the first request's row. */
const POLL_MS = 50;
/** Statuses a retry may well see otherwise (a conflict, a limit, a timeout): not stored, the key is freed. */
const TRANSIENT = new Set([408, 409, 423, 425, 429]);

/** The same JSON value, keys sorted at every level, so `{a,b}` and `{b,a}` hash alike. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The fingerprint of a request: method, path and query, JSON body. */
export function requestHash(req: Request): string {
  return createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n${req.body === undefined ? '' : canonical(req.body)}`)
    .digest('hex');
}

/** The request's Idempotency-Key, undefined without one; a malformed key is a 400. */
export function idempotencyKey(req: Request): string | undefined {
  const key = req.get(IDEMPOTENCY_KEY_HEADER);
  if (key === undefined) return undefined;
  if (!KEY_PATTERN.test(key)) throw new HttpError(400, 'Idempotency-Key must be 1 to 255 printable ASCII characters');
  return key;
}

export interface IdempotencyOptions {
  /** How long a retry waits for the first request with its key before a 409. */
  waitMs: number;
}

export class Idempotency {
  readonly #repo: IdempotencyRepository;
  readonly #waitMs: number;

  constructor(repo: IdempotencyRepository, opts: IdempotencyOptions) {
    this.#repo = repo;
    this.#waitMs = opts.waitMs;
  }

  /**
   * Answers `res` with the response of the first request with `key`, doing `work` only when
   * this is that first request. `work` resolves to the reply (status and JSON body) or throws
   * as a handler does; a thrown error is stored as the error reply it renders to, unless a
   * retry could fare otherwise (5xx, 409, 429), which frees the key.
   */
  async respond(projectId: string, key: string, req: Request, res: Response, work: () => Promise<StoredResponse>): Promise<void> {
    const hash = requestHash(req);
    const deadline = Date.now() + this.#waitMs;
    for (;;) {
      const claim = await this.#repo.claim(projectId, key, hash);
      if (claim.kind === 'mismatch') {
        throw new HttpError(422, 'This Idempotency-Key was already used for another request (method, path or body differ); use a new key for a new request');
      }
      if (claim.kind === 'replay') return send(res.set(IDEMPOTENT_REPLAYED_HEADER, 'true'), claim.response);
      if (claim.kind === 'claimed') break;
      if (Date.now() >= deadline) {
        throw new HttpError(409, 'A request with this Idempotency-Key is still in progress; retry once it has finished', { 'Retry-After': '1' });
      }
      await sleep(POLL_MS);
    }
    let reply: StoredResponse;
    try {
      reply = await work();
    } catch (err) {
      const r = renderError(err);
      if (r && r.status < 500 && !TRANSIENT.has(r.status)) await this.#repo.complete(projectId, key, { status: r.status, body: JSON.stringify({ detail: r.detail }) });
      else await this.#repo.release(projectId, key);
      throw err;
    }
    // Should this fail, the claim stays until IDEMPOTENCY_LOCK_SECONDS: retries get a 409 meanwhile.
    await this.#repo.complete(projectId, key, reply);
    send(res, reply);
  }
}

function send(res: Response, reply: StoredResponse): void {
  res.status(reply.status);
  if (reply.body === null) res.end();
  else res.type('application/json').send(reply.body);
}
