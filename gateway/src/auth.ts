/**
 * `X-Service-API-Key` authentication. Every request reads its key from the database (one
 * indexed lookup): no per-process cache, so a revoked key fails at once on every replica.
 */
import type { NextFunction, Request, Response } from 'express';
import type { ApiKeyRepository, KeyGrant } from './api-key.repository.js';

export const API_KEY_HEADER = 'x-service-api-key';

/** Methods a `read` key may use: the ones that change nothing. */
const READ_METHODS = new Set(['GET', 'HEAD']);

export class ApiKeyAuthenticator {
  readonly #repo: ApiKeyRepository;

  constructor(repo: ApiKeyRepository) {
    this.#repo = repo;
  }

  /** The keys' repository (the API's /api-keys routes manage keys through it). */
  get keys(): ApiKeyRepository {
    return this.#repo;
  }

  /** What `key` grants, or undefined when it is unknown or revoked. */
  async authenticate(key: string): Promise<KeyGrant | undefined> {
    return key.length <= 200 ? this.#repo.grantFor(key) : undefined;
  }

  /**
   * Express middleware: 401 without a valid key, 403 for a read key on a method that changes
   * state; otherwise `res.locals.projectId`, `keyId` and `scope`.
   */
  middleware() {
    return async (req: Request, res: Response, next: NextFunction) => {
      const key = req.get(API_KEY_HEADER);
      const grant = key ? await this.authenticate(key) : undefined;
      if (!grant) {
        res.status(401).json({ detail: 'Invalid or missing API key' });
        return;
      }
      if (grant.scope === 'read' && !READ_METHODS.has(req.method)) {
        res.status(403).json({ detail: 'This API key has the read scope: it cannot change anything (use a key with the full scope)' });
        return;
      }
      res.locals.projectId = grant.projectId;
      res.locals.keyId = grant.keyId;
      res.locals.scope = grant.scope;
      next();
    };
  }
}
