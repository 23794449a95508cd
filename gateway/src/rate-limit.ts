/**
 * Per-key rate limits: requests per second with a burst, and POSTs (creates and actions) per
 * minute. Over a limit: 429 with Retry-After and the API's `{"detail": …}`.
 */
import type { NextFunction, Request, Response } from 'express';
import type { Bucket, RateLimitRepository } from './rate-limit.repository.js';

export interface RateLimits {
  /** Sustained requests per second; 0 = no limit. */
  perSecond: number;
  /** Requests allowed at once. */
  burst: number;
  /** POSTs per minute; 0 = no limit. */
  createsPerMinute: number;
}

export class RateLimiter {
  readonly #repo: RateLimitRepository;
  readonly #limits: RateLimits;
  readonly #requests: Bucket;
  readonly #creates: Bucket;

  constructor(repo: RateLimitRepository, limits: RateLimits) {
    this.#repo = repo;
    this.#limits = limits;
    this.#requests = { name: 'requests', capacity: Math.max(limits.burst, 1), perSecond: limits.perSecond };
    this.#creates = { name: 'creates', capacity: limits.createsPerMinute, perSecond: limits.createsPerMinute / 60 };
  }

  /** After authentication (it reads `res.locals.keyId`). */
  middleware() {
    return async (req: Request, res: Response, next: NextFunction) => {
      const keyId = res.locals.keyId as string;
      const l = this.#limits;
      if (l.perSecond > 0) {
        const wait = await this.#repo.take(keyId, this.#requests);
        if (wait > 0) return refuse(res, wait, `Rate limit reached: ${l.perSecond} requests per second per API key (bursts up to ${l.burst})`);
      }
      if (req.method === 'POST' && l.createsPerMinute > 0) {
        const wait = await this.#repo.take(keyId, this.#creates);
        if (wait > 0) return refuse(res, wait, `Rate limit reached: ${l.createsPerMinute} creates per minute per API key`);
      }
      next();
    };
  }
}

function refuse(res: Response, waitSeconds: number, detail: string): void {
  const after = Math.max(1, Math.ceil(waitSeconds));
  res.set('Retry-After', String(after)).status(429).json({ detail: `${detail}; retry after ${after} s` });
}
