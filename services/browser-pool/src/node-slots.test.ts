import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NodeSlots } from './node-slots.js';

/** Whether `p` has settled by the time already-queued callbacks have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

test('when the node is full, then a launch waits for a slot to be released; a request goes before a warm launch and asks the warm pool for room', async () => {
  const slots = new NodeSlots(2);
  let starved = 0;
  slots.onStarved = () => void starved++;
  const a = await slots.acquire('request');
  await slots.acquire('warm');
  assert.equal(slots.held, 2);
  const warm = slots.acquire('warm');
  const request = slots.acquire('request');
  assert.equal(starved, 1, 'the waiting request asked for a warm browser to go');
  assert.equal(await settled(request), false, 'full: the request waits');
  a.release();
  a.release(); // idempotent
  assert.equal(await settled(request), true, 'the request got the freed slot first');
  assert.equal(await settled(warm), false);
  assert.equal(slots.held, 2);
  (await request).release();
  (await warm).release();
  assert.equal(slots.held, 1);
});

test('when a waiting launch is aborted, then it leaves the queue and holds nothing', async () => {
  const slots = new NodeSlots(1);
  const held = await slots.acquire('request');
  const abort = new AbortController();
  const waiting = slots.acquire('warm', abort.signal);
  abort.abort();
  await assert.rejects(waiting, /aborted/);
  held.release();
  assert.equal(slots.held, 0, 'the aborted one was not granted the freed slot');
});
