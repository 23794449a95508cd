import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from './logger.js';
import { stopAll } from './shutdown.js';

const logger = createLogger('test', 'silent');

test('when every step stops, then they run in the given order and the result is clean', async () => {
  const order: string[] = [];
  const clean = await stopAll(
    ['server', 'workers', 'bus', 'db'].map((name) => ({ name, stop: async () => void order.push(name) })),
    1000,
    logger,
  );
  assert.equal(clean, true);
  assert.deepEqual(order, ['server', 'workers', 'bus', 'db']);
});

test('when a step hangs, then shutdown gives up within its budget and reports it', async () => {
  const order: string[] = [];
  const started = Date.now();
  const clean = await stopAll(
    [
      { name: 'hangs', stop: () => new Promise<void>(() => order.push('hangs')) },
      { name: 'after', stop: async () => void order.push('after') },
    ],
    200,
    logger,
  );
  assert.equal(clean, false);
  assert.ok(Date.now() - started < 2000);
  assert.deepEqual(order, ['hangs']);
});

test('when a step throws, then the later steps still run and the result is not clean', async () => {
  const order: string[] = [];
  const clean = await stopAll(
    [
      { name: 'fails', stop: async () => { throw new Error('boom'); } },
      { name: 'db', stop: async () => void order.push('db') },
    ],
    1000,
    logger,
  );
  assert.equal(clean, false);
  assert.deepEqual(order, ['db']);
});
