import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { natsForTests } from '../../../test/support/infra.js';
import { Agent, type BrowserLifecycleEvent, type RunEvent } from '../../../gen/ats/common/v1/common.js';
import { connectBus, type Bus } from './bus.js';
import { createLogger, currentRequestId, withRequestId } from './logger.js';
import { browserLifecycle, publish, runEvents, runStops, runWakeups, subscribe, type Delivery } from './subjects.js';

describe('subjects', () => {
  test('when a key is built into a subject and parsed back, then it is the same key', () => {
    assert.equal(browserLifecycle.subject({ browserId: 'brw_1', kind: 'started' }), 'ats.browser.brw_1.started');
    assert.deepEqual(browserLifecycle.parse('ats.browser.brw_1.stopped'), { browserId: 'brw_1', kind: 'stopped' });
    assert.equal(runEvents.subject({ runId: 'run_9' }), 'ats.run.run_9.event');
    assert.deepEqual(runStops.parse(runStops.subject({ runId: 'run_9' })), { runId: 'run_9' });
    assert.deepEqual(runWakeups.parse(runWakeups.subject({})), {});
  });

  test('when a subject belongs to another topic or breaks the template, then it does not parse', () => {
    assert.equal(browserLifecycle.parse('ats.browser.brw_1.crashed'), undefined, 'not a lifecycle kind');
    assert.equal(browserLifecycle.parse('ats.browser.brw_1'), undefined);
    assert.equal(runEvents.parse('ats.run.run_9.stop'), undefined);
    assert.equal(runStops.parse('ats.runs.run_9.stop'), undefined);
    assert.equal(runWakeups.parse('ats.runs.wakeup.now'), undefined);
  });

  test('when a key part is empty or holds a dot or a wildcard, then no subject is built from it', () => {
    for (const runId of ['', 'a.b', '*', '>', 'a b']) assert.throws(() => runStops.subject({ runId }), /cannot be a subject token/, runId);
  });

  test('when a pattern leaves parts of the key out, then those parts are wildcards', () => {
    assert.equal(browserLifecycle.pattern(), 'ats.browser.*.*');
    assert.equal(browserLifecycle.pattern({ kind: 'stopped' }), 'ats.browser.*.stopped');
    assert.equal(runEvents.pattern({ runId: 'run_9' }), 'ats.run.run_9.event');
  });
});

describe('typed publish and subscribe over NATS', () => {
  let nats: Awaited<ReturnType<typeof natsForTests>>;
  let a: Bus;
  let b: Bus;
  const lines: string[] = [];
  const logger = createLogger(
    'test',
    'info',
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
  before(async () => {
    nats = await natsForTests();
    a = await connectBus(nats.url, 'a', logger, { token: nats.token });
    b = await connectBus(nats.url, 'b', logger, { token: nats.token });
  });
  after(async () => {
    await a.stop();
    await b.stop();
    await nats.stop();
  });

  /** Subscribes on `b`, runs `act`, and returns what arrived once `count` messages have. */
  async function receive<K extends Record<string, string>, T>(
    sub: (onMessage: (d: Delivery<K, T> & { context: string | undefined }) => void) => { unsubscribe(): void },
    act: () => void,
    count: number,
  ) {
    const got: (Delivery<K, T> & { context: string | undefined })[] = [];
    let done!: () => void;
    const all = new Promise<void>((r) => (done = r));
    const s = sub((d) => {
      got.push(d);
      if (got.length === count) done();
    });
    await b.nc.flush();
    act();
    await a.nc.flush();
    await all;
    s.unsubscribe();
    return got;
  }

  test('when a message is published within a request, then the subscriber gets its key, its payload and that request id, and runs in it', async () => {
    const browserId = `brw_${Date.now()}`;
    const started: BrowserLifecycleEvent = { browserId, projectId: 'prj_1', sessionId: 'ses_1', runId: undefined, agent: Agent.AGENT_BROWSERCODE, profileId: undefined, reason: undefined, ts: '2026-01-01T00:00:00.000Z' };
    const got = await receive<{ browserId: string; kind: 'started' | 'stopped' }, BrowserLifecycleEvent>(
      (onMessage) =>
        subscribe(b.nc, browserLifecycle, (d) => {
          logger.info({ browserId: d.key.browserId }, 'heard');
          onMessage({ ...d, context: currentRequestId() });
        }, { logger, filter: { browserId } }),
      () => withRequestId('req-nats-1', () => publish(a.nc, browserLifecycle, { browserId, kind: 'started' }, started)),
      1,
    );
    assert.deepEqual(got[0]!.key, { browserId, kind: 'started' });
    assert.deepEqual(got[0]!.payload, started);
    assert.equal(got[0]!.requestId, 'req-nats-1');
    assert.equal(got[0]!.context, 'req-nats-1', 'the callback runs in the request context');
    const heard = lines.map((l) => JSON.parse(l) as { msg: string; browserId?: string; requestId?: string }).find((l) => l.msg === 'heard' && l.browserId === browserId);
    assert.equal(heard?.requestId, 'req-nats-1', 'a log line of the callback carries the request id');
  });

  test('when a message is published outside any request, then it arrives without a request id', async () => {
    const runId = `run_${Date.now()}`;
    const event: RunEvent = { id: 3, runId, ts: '2026-01-01T00:00:00.000Z', type: 'run.queued', dataJson: '{"a":1}' };
    const got = await receive<{ runId: string }, RunEvent>(
      (onMessage) => subscribe(b.nc, runEvents, (d) => onMessage({ ...d, context: currentRequestId() }), { logger, filter: { runId } }),
      () => publish(a.nc, runEvents, { runId }, event),
      1,
    );
    assert.deepEqual(got[0]!.payload, event);
    assert.equal(got[0]!.requestId, undefined);
    assert.equal(got[0]!.context, undefined);
  });

  test('when a body cannot be decoded, then it is dropped and logged; an empty body (as the previous release sent) is the empty message', async () => {
    const runId = `run_${Date.now()}`;
    const got = await receive<{ runId: string }, { runId: string }>(
      (onMessage) => subscribe(b.nc, runStops, (d) => onMessage({ ...d, context: currentRequestId() }), { logger, filter: { runId } }),
      () => {
        a.nc.publish(runStops.subject({ runId }), 'not json');
        a.nc.publish(runStops.subject({ runId }));
      },
      1,
    );
    assert.deepEqual(got.map((d) => [d.key.runId, d.payload.runId]), [[runId, '']]);
    assert.ok(lines.some((l) => l.includes('undecodable message dropped') && l.includes(runId)));
  });
});
