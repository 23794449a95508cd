/**
 * pino logger with the service name on every line and secrets redacted, and the request context:
 * while code runs for a request (a gRPC call, a NATS message, a run's work), every line of every
 * logger carries that request's `requestId`, so one grep of the id finds the whole request.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** Paths whose values never reach a log line. */
export const REDACT_PATHS = [
  'apiKey', '*.apiKey', 'key', '*.key', 'token', '*.token', 'secret', '*.secret', 'password', '*.password',
  'authorization', '*.authorization', 'signingSecret', '*.signingSecret', 'bootstrapApiKey', '*.bootstrapApiKey',
  'internalToken', '*.internalToken', 'natsToken', '*.natsToken', 'secretAccessKey', '*.secretAccessKey',
  'databaseUrl', '*.databaseUrl', 'uploadUrl', '*.uploadUrl', 'downloadUrl', '*.downloadUrl', 'upload_url', '*.upload_url',
  'cdpUrl', '*.cdpUrl', 'liveViewUrl', '*.liveViewUrl', 'url', '*.url',
  'req.headers["x-service-api-key"]', 'headers["x-service-api-key"]', 'req.headers.authorization', 'req.headers.cookie',
];

/** What is known of the request the running code serves. */
interface RequestContext {
  readonly requestId: string;
}

const requestContext = new AsyncLocalStorage<RequestContext>();

/** Where a request id travels: the HTTP header, the gRPC metadata key and the NATS header. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** A request id as the gateway makes or accepts them (`X-Request-Id`); anything else is not carried on. */
const REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;

/** True when `id` is a well-formed request id. */
export function isRequestId(id: unknown): id is string {
  return typeof id === 'string' && REQUEST_ID.test(id);
}

/**
 * Runs `fn` as part of request `requestId`: its log lines, the gRPC calls and NATS messages it makes
 * (and whatever it starts that outlives it) carry the id. Without a well-formed id, `fn` runs outside
 * any request.
 */
export function withRequestId<T>(requestId: string | null | undefined, fn: () => T): T {
  return isRequestId(requestId) ? requestContext.run({ requestId }, fn) : requestContext.exit(fn);
}

/** The id of the request the running code serves; undefined outside one. */
export function currentRequestId(): string | undefined {
  return requestContext.getStore()?.requestId;
}

/** Creates the root logger of a service. */
export function createLogger(service: string, level = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // A mixin rather than a child logger per request: domain code logs through the service's
      // logger it was built with, and its lines must carry the id too.
      mixin: () => {
        const requestId = currentRequestId();
        return requestId ? { requestId } : {}; // a new object each line: pino writes the line's fields into it
      },
    },
    destination,
  );
}

/** Strips the query string (tokens, signatures) from a URL or path before it is logged. */
export function redactUrl(u: string): string {
  const i = u.indexOf('?');
  return i === -1 ? u : `${u.slice(0, i)}?[redacted]`;
}
