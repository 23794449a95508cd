/**
 * `X-Service-API-Key` authentication. Lookups are cached briefly (a revoked key stops working
 * within AUTH_CACHE_MS); the cache is bounded so a flood of random keys cannot grow it.
 */
import type { NextFunction, Request, Response } from 'express';
import { hashApiKey, type ApiKeyRepository } from './api-key.repository.js';

export const API_KEY_HEADER = 'x-service-api-key';

export class ApiKeyAuthenticator {
  readonly #repo: ApiKeyRepository;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { projectId: string | undefined; until: number }>();

  constructor(repo: ApiKeyRepository, ttlMs: number) {
    this.#repo = repo;
    this.#ttlMs = ttlMs;
  }

  /** The project of `key`, or undefined when it is unknown or revoked. */
  async authenticate(key: string): Promise<string | undefined> {
    const h = hashApiKey(key);
    const hit = this.#cache.get(h);
    if (hit && hit.until > Date.now()) return hit.projectId;
    const projectId = await this.#repo.projectFor(key);
    if (this.#cache.size >= 10000) this.#cache.clear();
    this.#cache.set(h, { projectId, until: Date.now() + this.#ttlMs });
    return projectId;
  }

  /** Express middleware: 401 without a valid key; otherwise `res.locals.projectId`. */
  middleware() {
    return async (req: Request, res: Response, next: NextFunction) => {
      const key = req.get(API_KEY_HEADER);
      const projectId = key && key.length <= 200 ? await this.authenticate(key) : undefined;
      if (!projectId) {
        res.status(401).json({ detail: 'Invalid or missing API key' });
        return;
      }
      res.locals.projectId = projectId;
      next();
    };
  }
}
