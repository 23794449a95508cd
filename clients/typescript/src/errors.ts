/**
 * The SDK's errors. A reply with an error status becomes the class of its status, carrying the
 * API's `detail` and the request id (`X-Request-Id`) and printing both; a request that got no
 * reply is an APIConnectionError (APITimeoutError when it ran out of time). Messages never hold
 * the API key or a presigned link's signature.
 */
import type { ValidationErrorItem } from './models.js';

/** The base of every error the SDK throws. */
export class AgentTaskServiceError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A call to the API that failed: with a reply (`status` set) or without one (connection, timeout). */
export class APIError extends AgentTaskServiceError {
  /** The HTTP status of the reply; undefined when there was none. */
  readonly status: number | undefined;
  /** The API's explanation (`detail` of the reply body), or null when there was none. */
  readonly detail: string | null;
  /** The reply's `X-Request-Id` (quote it when asking about a failure), or null. */
  readonly requestId: string | null;

  constructor(message: string, init: { status?: number; detail?: string | null; requestId?: string | null; cause?: unknown }) {
    super(message, { cause: init.cause });
    this.status = init.status;
    this.detail = init.detail ?? null;
    this.requestId = init.requestId ?? null;
  }
}

/** A reply with an error status; the subclasses name the common ones, this class is any other. */
export class APIStatusError extends APIError {
  declare readonly status: number;
  /** The reply's body as parsed JSON (or text when it was not JSON). */
  readonly body: unknown;
  /** The reply's headers. */
  readonly headers: Headers;

  constructor(init: { status: number; detail: string | null; requestId: string | null; body: unknown; headers: Headers; what: string }) {
    const id = init.requestId ? ` (request id ${init.requestId})` : '';
    super(`${init.status} ${init.detail ?? 'with no detail'} — ${init.what}${id}`, init);
    this.body = init.body;
    this.headers = init.headers;
  }
}

/** 400: the request is well formed but not acceptable (e.g. workspace_id on browser-agent). */
export class BadRequestError extends APIStatusError {}
/** 401: the API key is missing, unknown or revoked. */
export class AuthenticationError extends APIStatusError {}
/** 404: no such resource in this project (another project's resources are 404 too), or an unknown agent. */
export class NotFoundError extends APIStatusError {}
/** 409: the resource's state forbids it (a busy or closed session, a run already ended, …). */
export class ConflictError extends APIStatusError {}

/** 422: the request failed validation; `errors` lists each problem as the API reported it. */
export class UnprocessableEntityError extends APIStatusError {
  /** Each validation problem: its type, location (`['body', 'task']`), message and the input. */
  readonly errors: ValidationErrorItem[];

  constructor(init: ConstructorParameters<typeof APIStatusError>[0] & { errors: ValidationErrorItem[] }) {
    super(init);
    this.errors = init.errors;
  }
}

/** 429: a limit is reached; `retryAfter` is the server's advice in seconds, when it gave one. */
export class RateLimitError extends APIStatusError {
  /** Seconds to wait before trying again (the `Retry-After` header), or null. */
  readonly retryAfter: number | null;

  constructor(init: ConstructorParameters<typeof APIStatusError>[0]) {
    super(init);
    const header = Number(init.headers.get('retry-after'));
    this.retryAfter = init.headers.has('retry-after') && Number.isFinite(header) ? header : null;
  }
}

/** 500 and above: the service failed; the request id finds the details in its logs. */
export class InternalServerError extends APIStatusError {}

/** No reply: the connection was refused, reset or cut before the reply was complete. */
export class APIConnectionError extends APIError {
  constructor(what: string, cause?: unknown) {
    super(`Connection error — ${what}${describeCause(cause)}`, { cause });
  }
}

/** No reply in time (the `timeoutMs` setting). */
export class APITimeoutError extends APIConnectionError {
  constructor(what: string, timeoutMs: number, cause?: unknown) {
    super(what, cause);
    this.message = `Request timed out after ${timeoutMs} ms — ${what}`;
  }
}

/** `runs.wait` gave up: the run did not end within the time given. */
export class RunTimeoutError extends AgentTaskServiceError {
  /** The run that was still going. */
  readonly runId: string;
  /** Its status when the wait gave up. */
  readonly lastStatus: string;

  constructor(runId: string, timeoutMs: number, lastStatus: string) {
    super(`Run ${runId} did not end within ${timeoutMs} ms (still ${lastStatus})`);
    this.runId = runId;
    this.lastStatus = lastStatus;
  }
}

/** The error class for a reply's status. */
export function statusErrorClass(status: number): typeof APIStatusError {
  if (status === 400) return BadRequestError;
  if (status === 401) return AuthenticationError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return InternalServerError;
  return APIStatusError;
}

/** The low-level reason of a failed fetch (`ECONNREFUSED`, `UND_ERR_SOCKET`, …), when there is one. */
function describeCause(cause: unknown): string {
  let c: unknown = cause;
  for (let depth = 0; c && depth < 4; depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string') return ` (${code})`;
    c = (c as { cause?: unknown }).cause;
  }
  return cause instanceof Error && cause.message ? ` (${cause.message})` : '';
}
