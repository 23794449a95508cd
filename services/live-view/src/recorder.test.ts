import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, type BrowserLifecycleEvent } from '../../../gen/ats/common/v1/common.js';
import { Gate, browserEventOf } from './recorder.js';

const payload = (p: Partial<BrowserLifecycleEvent>): BrowserLifecycleEvent => ({
  browserId: 'brw_1',
  projectId: 'prj_1',
  sessionId: undefined,
  runId: undefined,
  agent: Agent.AGENT_UNSPECIFIED,
  profileId: undefined,
  reason: undefined,
  ts: '2026-01-01T00:00:01.000Z',
  ...p,
});
const delivery = (p: Partial<BrowserLifecycleEvent>, browserId = 'brw_1') => ({ key: { browserId }, payload: payload(p), requestId: undefined });

test('when a lifecycle message names its project, then the recorder takes its browser and time from it', () => {
  assert.deepEqual(browserEventOf(delivery({}), 5), { browserId: 'brw_1', projectId: 'prj_1', tsMs: Date.parse('2026-01-01T00:00:01.000Z') });
  assert.equal(browserEventOf(delivery({ ts: 'not a time' }), 5)?.tsMs, 5, 'an unreadable time is now');
});

test('when a lifecycle message names no project or another browser than its subject, then it is ignored', () => {
  assert.equal(browserEventOf(delivery({ projectId: '' }), 5), undefined);
  assert.equal(browserEventOf(delivery({ browserId: 'brw_2' }), 5), undefined);
});

test('when more recordings start than the gate lets through, then at most its limit run at once and every one runs, in order', async () => {
  const gate = new Gate(3);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const releases: (() => void)[] = [];
  const all = Array.from({ length: 10 }, (_, i) =>
    gate.run(async () => {
      running++;
      most = Math.max(most, running);
      order.push(i);
      await new Promise<void>((r) => releases.push(r));
      running--;
      return i;
    }),
  );
  // Let each started task finish one by one, checking the bound each time.
  while (order.length < 10 || releases.length) {
    await new Promise((r) => setImmediate(r));
    assert.ok(running <= 3, `running ${running}`);
    releases.shift()?.();
  }
  assert.deepEqual(await Promise.all(all), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(most, 3);
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  // A task that throws still lets the next one in.
  await assert.rejects(gate.run(async () => Promise.reject(new Error('boom'))));
  assert.equal(await gate.run(async () => 'after'), 'after');
});
