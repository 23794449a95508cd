import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NotFoundError, RemoteError, ResourceExhaustedError, Status, fromServiceError, toServiceError } from './errors.js';

test('when an AppError crosses gRPC, then its status and message arrive as a public RemoteError', () => {
  const remote = fromServiceError(toServiceError(new NotFoundError('Run not found')));
  assert.ok(remote instanceof RemoteError);
  assert.equal(remote.code, Status.NOT_FOUND);
  assert.equal(remote.publicMessage, 'Run not found');
});

test('when a limit error crosses gRPC, then its Retry-After hint survives', () => {
  const remote = fromServiceError(toServiceError(new ResourceExhaustedError('Too many browsers', { retryAfterSeconds: 30 })));
  assert.equal(remote.code, Status.RESOURCE_EXHAUSTED);
  assert.equal(remote.retryAfterSeconds, 30);
});

test('when an unexpected error crosses gRPC, then only a bare INTERNAL leaves the process', () => {
  const se = toServiceError(new Error('connect ECONNREFUSED 10.0.0.5:5432 password=hunter2'));
  assert.equal(se.code, Status.INTERNAL);
  assert.equal(se.details, 'Internal error');
  assert.equal(fromServiceError(se).publicMessage, undefined);
});

test('when a transport error arrives (no public mark), then it has no public message', () => {
  const remote = fromServiceError({ code: Status.UNAVAILABLE, details: 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:50051' });
  assert.equal(remote.code, Status.UNAVAILABLE);
  assert.equal(remote.publicMessage, undefined);
});
