/**
 * Error classes that carry a gRPC status. Handlers throw these; the gRPC server helper turns
 * them into status + message, the client helper turns them back into the same classes, and
 * the gateway maps the status to HTTP in one table.
 */
import { Metadata, status as Status, type ServiceError } from '@grpc/grpc-js';

export { Status };

/** Metadata key marking a message as safe to show a client. */
export const PUBLIC_MESSAGE_KEY = 'ats-public-message';
/** Metadata key carrying a Retry-After hint in seconds. */
export const RETRY_AFTER_KEY = 'ats-retry-after';

/** Base of every error the services raise on purpose; its message is safe to show a client. */
export class AppError extends Error {
  readonly code: Status = Status.INTERNAL;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

export class InvalidArgumentError extends AppError {
  override readonly code = Status.INVALID_ARGUMENT;
}
/** A list cursor that no page handed out (malformed, or naming nothing of the project's). */
export const INVALID_CURSOR_MESSAGE = 'Invalid cursor: pass the nextCursor of the previous page';
export class InvalidCursorError extends InvalidArgumentError {
  constructor() {
    super(INVALID_CURSOR_MESSAGE);
  }
}
export class NotFoundError extends AppError {
  override readonly code = Status.NOT_FOUND;
}
export class AlreadyExistsError extends AppError {
  override readonly code = Status.ALREADY_EXISTS;
}
/** A state conflict the client can resolve by retrying later or changing the request (409). */
export class ConflictError extends AppError {
  override readonly code = Status.ABORTED;
}
export class FailedPreconditionError extends AppError {
  override readonly code = Status.FAILED_PRECONDITION;
}
export class PermissionDeniedError extends AppError {
  override readonly code = Status.PERMISSION_DENIED;
}
export class UnauthenticatedError extends AppError {
  override readonly code = Status.UNAUTHENTICATED;
}
export class UnimplementedError extends AppError {
  override readonly code = Status.UNIMPLEMENTED;
}
export class UnavailableError extends AppError {
  override readonly code = Status.UNAVAILABLE;
}
/** The caller gave up on the call (deadline or disconnect) and what it asked was undone. */
export class CancelledError extends AppError {
  override readonly code = Status.CANCELLED;
}
export class DeadlineExceededError extends AppError {
  override readonly code = Status.DEADLINE_EXCEEDED;
}
export class InternalError extends AppError {
  override readonly code = Status.INTERNAL;
}
/** A limit was hit; `retryAfterSeconds` becomes the HTTP Retry-After header. */
export class ResourceExhaustedError extends AppError {
  override readonly code = Status.RESOURCE_EXHAUSTED;
  readonly retryAfterSeconds: number | undefined;
  constructor(message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

/**
 * An error that came back from another service. `publicMessage` is set only when the remote
 * side raised it on purpose (an AppError); transport errors carry internals and leave it unset.
 */
export class RemoteError extends AppError {
  override readonly code: Status;
  readonly publicMessage: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  constructor(code: Status, message: string, publicMessage: string | undefined, retryAfterSeconds?: number, cause?: unknown) {
    super(message, { cause });
    this.code = code;
    this.publicMessage = publicMessage;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** A ServiceError-shaped object for a grpc-js callback. Unknown errors become a bare INTERNAL. */
export function toServiceError(err: unknown): Partial<ServiceError> & { code: Status; details: string } {
  const metadata = new Metadata();
  if (err instanceof RemoteError) {
    // Pass a downstream service's verdict through unchanged (public only if it was public).
    if (err.publicMessage !== undefined) metadata.set(PUBLIC_MESSAGE_KEY, '1');
    if (err.retryAfterSeconds !== undefined) metadata.set(RETRY_AFTER_KEY, String(err.retryAfterSeconds));
    const details = err.publicMessage ?? (err.code === Status.INTERNAL ? 'Internal error' : err.message);
    return { code: err.code, details, metadata, name: 'ServiceError', message: details };
  }
  if (err instanceof AppError) {
    metadata.set(PUBLIC_MESSAGE_KEY, '1');
    if (err instanceof ResourceExhaustedError && err.retryAfterSeconds !== undefined) {
      metadata.set(RETRY_AFTER_KEY, String(err.retryAfterSeconds));
    }
    return { code: err.code, details: err.message, metadata, name: 'ServiceError', message: err.message };
  }
  return { code: Status.INTERNAL, details: 'Internal error', metadata, name: 'ServiceError', message: 'Internal error' };
}

/** Turns an error from a grpc-js client call into a RemoteError. */
export function fromServiceError(err: unknown): RemoteError {
  if (err instanceof RemoteError) return err;
  const se = err as Partial<ServiceError>;
  const code = typeof se.code === 'number' ? (se.code as Status) : Status.UNKNOWN;
  const md = se.metadata instanceof Metadata ? se.metadata : undefined;
  const isPublic = md?.get(PUBLIC_MESSAGE_KEY)[0] === '1';
  const retry = md?.get(RETRY_AFTER_KEY)[0];
  const details = typeof se.details === 'string' ? se.details : String((se as Error).message ?? err);
  return new RemoteError(code, details, isPublic ? details : undefined, retry !== undefined ? Number(retry) : undefined, err);
}
