import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { natsForTests } from '../../../test/support/infra.js';
import { connectBus } from './bus.js';
import { createLogger } from './logger.js';

let nats: Awaited<ReturnType<typeof natsForTests>>;
before(async () => {
  nats = await natsForTests();
});
after(() => nats.stop());

test('when a message is published and the bus stopped, then the subscriber got it before the drain finished', async () => {
  const logger = createLogger('test', 'silent');
  const a = await connectBus(nats.url, 'a', logger, { token: nats.token });
  const b = await connectBus(nats.url, 'b', logger, { token: nats.token });
  const subject = `ats.test.${Date.now()}`;
  const got: string[] = [];
  const sub = b.nc.subscribe(subject, { callback: (_err, msg) => void got.push(msg.string()) });
  await b.nc.flush();
  a.nc.publish(subject, 'hello');
  await a.stop();
  await a.stop(); // idempotent
  await b.nc.flush();
  sub.unsubscribe();
  await b.stop();
  assert.deepEqual(got, ['hello']);
  assert.equal(a.nc.isClosed(), true);
});
