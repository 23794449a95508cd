/**
 * CORS for web apps on the origins of an allow-list (CORS_ALLOWED_ORIGINS; none by default).
 * The key travels in a header, never in a cookie, so credentials are never allowed.
 */
import type { NextFunction, Request, Response } from 'express';
import { API_KEY_HEADER } from './auth.js';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER } from './idempotency.js';
import { REQUEST_ID_HEADER } from '../../services/common/src/logger.js';

const ALLOWED_METHODS = 'GET, POST, PATCH, DELETE';
const ALLOWED_HEADERS = [API_KEY_HEADER, 'content-type', IDEMPOTENCY_KEY_HEADER, 'last-event-id', REQUEST_ID_HEADER].join(', ');
const EXPOSED_HEADERS = ['retry-after', 'x-request-id', IDEMPOTENT_REPLAYED_HEADER].join(', ');
/** How long a browser may reuse a preflight's answer. */
const PREFLIGHT_MAX_AGE_S = 600;

export function corsMiddleware(origins: readonly string[]) {
  const allowed = new Set(origins);
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('origin');
    if (!origin) return next();
    res.vary('Origin');
    const ok = allowed.has(origin);
    if (req.method === 'OPTIONS' && req.get('access-control-request-method')) {
      // A refused preflight carries no Access-Control-Allow-Origin: the browser blocks the call.
      if (!ok) return void res.status(403).json({ detail: 'This origin is not allowed to call the API (CORS_ALLOWED_ORIGINS)' });
      res
        .set({
          'Access-Control-Allow-Origin': origin,
          'Access-Control-Allow-Methods': ALLOWED_METHODS,
          'Access-Control-Allow-Headers': ALLOWED_HEADERS,
          'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_S),
        })
        .status(204)
        .end();
      return;
    }
    if (ok) res.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSED_HEADERS });
    next();
  };
}
