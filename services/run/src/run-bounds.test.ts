import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RemoteError, Status, UnavailableError } from '../../common/src/errors.js';
import { retryWhileUnavailable } from './pool-retry.js';
import { RunGuard, settleWithin, TIME_LIMIT_ERROR } from './run-bounds.js';

describe('settleWithin', () => {
  test('when stuck work is aborted, then it is let go after the grace and its late end is reported', async () => {
    const ctl = new AbortController();
    let finish!: () => void;
    const work = new Promise<void>((r) => (finish = r));
    const events: string[] = [];
    const settled = settleWithin(work, ctl.signal, 50, () => events.push('stuck'), () => events.push('late end'));
    ctl.abort();
    await settled;
    assert.deepEqual(events, ['stuck']);
    finish();
    await work;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(events, ['stuck', 'late end']);
  });

  test('when work ends by itself, then nothing is reported stuck', async () => {
    const ctl = new AbortController();
    const events: string[] = [];
    await settleWithin(Promise.reject(new Error('x')), ctl.signal, 10, () => events.push('stuck'));
    ctl.abort();
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(events, []);
  });
});

describe('RunGuard', () => {
  test('when the time limit passes, then the work is aborted with the limit as the reason, and overdue work is reported after the grace', async () => {
    let overdue = 0;
    let reported!: () => void;
    const overdueReported = new Promise<void>((r) => (reported = r));
    const guard = new RunGuard(new AbortController().signal, Date.now() + 20, { graceMs: 30, overdue: () => (overdue++, reported()) });
    await new Promise((r) => guard.signal.addEventListener('abort', r));
    assert.equal(guard.cutShort?.message, TIME_LIMIT_ERROR);
    assert.equal(overdue, 0, 'not before the grace');
    await overdueReported;
    assert.equal(overdue, 1);
    guard.dispose();
  });

  test('when the run is stopped by its user, then it is not cut short by the service', () => {
    const stop = new AbortController();
    const guard = new RunGuard(stop.signal, Date.now() + 60000, { graceMs: 10, overdue: () => assert.fail('not overdue') });
    stop.abort();
    guard.cut(new Error('late'));
    assert.equal(guard.signal.aborted, true);
    assert.equal(guard.cutShort, undefined);
    guard.dispose();
  });
});

describe('retryWhileUnavailable', () => {
  const unavailable = () => new RemoteError(Status.UNAVAILABLE, 'No connection established', undefined);

  test('when the pool answers after two unavailable tries, then the call succeeds', async () => {
    let calls = 0;
    const got = await retryWhileUnavailable('createBrowser', async () => (++calls < 3 ? Promise.reject(unavailable()) : 'ok'), { budgetMs: 5000, firstDelayMs: 5 });
    assert.equal(got, 'ok');
    assert.equal(calls, 3);
  });

  test('when the pool stays unavailable past the budget, then it fails saying so; other errors fail at once', async () => {
    await assert.rejects(retryWhileUnavailable('createBrowser', async () => Promise.reject(unavailable()), { budgetMs: 50, firstDelayMs: 5 }), (err: Error) => {
      assert.ok(err instanceof UnavailableError);
      assert.equal(err.message, 'The browser service was unavailable for 0 s; try again later');
      return true;
    });
    let calls = 0;
    const notFound = new RemoteError(Status.NOT_FOUND, 'Browser not found', 'Browser not found');
    await assert.rejects(retryWhileUnavailable('getBrowser', async () => (calls++, Promise.reject(notFound)), { budgetMs: 5000 }), notFound);
    assert.equal(calls, 1);
  });
});
