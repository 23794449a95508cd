/**
 * gRPC status → HTTP, per google/rpc/code.proto, in one table, and the error middleware that
 * renders `{"detail": …}`. A 500 never echoes internals: the log holds them under the request id.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { AppError, RemoteError, ResourceExhaustedError, Status } from '../../services/common/src/errors.js';
import type { Logger } from '../../services/common/src/logger.js';
import { RequestValidationError, jsonInvalid } from './validation.js';

export const HTTP_STATUS: Record<Status, number> = {
  [Status.OK]: 200,
  [Status.CANCELLED]: 499,
  [Status.UNKNOWN]: 500,
  [Status.INVALID_ARGUMENT]: 400,
  [Status.DEADLINE_EXCEEDED]: 504,
  [Status.NOT_FOUND]: 404,
  [Status.ALREADY_EXISTS]: 409,
  [Status.PERMISSION_DENIED]: 403,
  [Status.RESOURCE_EXHAUSTED]: 429,
  [Status.FAILED_PRECONDITION]: 400,
  [Status.ABORTED]: 409,
  [Status.OUT_OF_RANGE]: 400,
  [Status.UNIMPLEMENTED]: 501,
  [Status.INTERNAL]: 500,
  [Status.UNAVAILABLE]: 503,
  [Status.DATA_LOSS]: 500,
  [Status.UNAUTHENTICATED]: 401,
};

/** Messages for statuses whose own message may carry internals (addresses, stack text). */
const GENERIC: Partial<Record<Status, string>> = {
  [Status.UNAVAILABLE]: 'Service unavailable, try again shortly',
  [Status.DEADLINE_EXCEEDED]: 'Upstream service timed out',
  [Status.UNIMPLEMENTED]: 'Not implemented yet',
  [Status.CANCELLED]: 'Request cancelled',
};

/** A plain HTTP error raised inside the gateway. */
export class HttpError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = this.constructor.name;
    this.status = status;
    this.headers = headers;
  }
}

export interface Rendered {
  status: number;
  detail: unknown;
  headers?: Record<string, string>;
}

/** What an error is answered with; undefined for a fault (a 500 whose detail is only logged). */
export function renderError(err: unknown): Rendered | undefined {
  if (err instanceof RequestValidationError) return { status: 422, detail: err.issues };
  if (err instanceof HttpError) return { status: err.status, detail: err.message, headers: err.headers };
  const e = err as { type?: string; status?: number; limit?: number };
  if (e?.type === 'entity.parse.failed') return { status: 422, detail: [jsonInvalid(err as Error)] };
  if (e?.type === 'entity.too.large') return { status: 413, detail: `Request body is too large (limit ${e.limit} bytes)` };
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return { status: 415, detail: 'Unsupported request body encoding' };
  // A path segment that is not valid percent-encoding names nothing that exists.
  if (err instanceof URIError && e.status === 400) return { status: 404, detail: 'Not Found' };
  // Any other refusal of the body parser (a body that does not inflate, a wrong length): its message is meant for clients.
  const x = err as { expose?: boolean; status?: number; message?: string };
  if (x?.expose === true && typeof x.status === 'number' && x.status >= 400 && x.status < 500) return { status: x.status, detail: `Request body could not be read: ${x.message}` };
  if (err instanceof RemoteError) {
    // A service refused a service's internal token: a deployment fault, not the client's key.
    if (err.code === Status.UNAUTHENTICATED) return undefined;
    const status = HTTP_STATUS[err.code] ?? 500;
    if (status >= 500 && status !== 501 && status !== 503 && status !== 504) return undefined;
    const headers = err.retryAfterSeconds !== undefined ? { 'Retry-After': String(err.retryAfterSeconds) } : undefined;
    return { status, detail: err.publicMessage ?? GENERIC[err.code] ?? 'Request failed', ...(headers ? { headers } : {}) };
  }
  if (err instanceof AppError) {
    const status = HTTP_STATUS[err.code] ?? 500;
    if (status === 500) return undefined;
    const headers = err instanceof ResourceExhaustedError && err.retryAfterSeconds !== undefined ? { 'Retry-After': String(err.retryAfterSeconds) } : undefined;
    return { status, detail: err.message, ...(headers ? { headers } : {}) };
  }
  return undefined;
}

/** The last middleware: every error becomes `{"detail": …}` with the right status. */
export function errorMiddleware(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const requestId = res.locals.requestId as string | undefined;
    const r = renderError(err);
    if (!r) {
      logger.error({ err, requestId, method: req.method, route: req.route?.path }, 'request failed');
      if (!res.headersSent) res.status(500).json({ detail: `Internal server error (request id ${requestId})` });
      return;
    }
    if (r.status >= 500) logger.warn({ requestId, status: r.status, err: (err as Error).message }, 'upstream error');
    if (res.headersSent) return;
    if (r.headers) res.set(r.headers);
    res.status(r.status).json({ detail: r.detail });
  };
}

/**
 * Requests Node's HTTP parser refuses before the app sees them (headers or URL too large, a
 * malformed request line) get the documented `{"detail": …}` body too.
 */
export function answerClientErrors(server: http.Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = JSON.stringify({ detail: status === 431 ? 'Request header fields or URL too large' : status === 408 ? 'Request timed out' : 'Bad request' });
    socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
}
