import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { createLogger } from '../../common/src/logger.js';
import { backoffMs, Dispatcher, post } from './dispatcher.js';
import { WebhookRepository, migrations } from './webhook.repository.js';
import { Webhooks } from './webhooks.js';

const logger = createLogger('test', process.env.TEST_LOG ?? 'silent');

let server: http.Server;
let base = '';
const policy = { allowLoopback: true, deniedPorts: [] };

before(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    if (req.url === '/redirect') return void res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
    if (req.url === '/big') return void res.writeHead(500).end('e'.repeat(100_000));
    if (req.url === '/slow') return; // never answers
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

describe('one delivery attempt', () => {
  test('when the receiver answers 2xx, then the attempt succeeds with its latency', async () => {
    const o = await post(`${base}/ok`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 204);
    assert.equal(o.error, null);
  });

  test('when the receiver redirects, then the redirect is not followed', async () => {
    const o = await post(`${base}/redirect`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 302);
    assert.match(o.error!, /redirects are not followed/);
  });

  test('when the receiver answers a long error, then only an excerpt is kept', async () => {
    const o = await post(`${base}/big`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 500);
    assert.ok(o.error!.length < 260, `${o.error!.length} characters`);
  });

  test('when the receiver does not answer, then the attempt ends at the timeout', async () => {
    const o = await post(`${base}/slow`, '{}', {}, policy, 300);
    assert.equal(o.statusCode, null);
    assert.match(o.error!, /no answer within 300 ms/);
    assert.ok(o.latencyMs < 2000);
  });

  test('when loopback is not allowed, then a loopback receiver is refused at delivery, by name or by address', async () => {
    const closed = { allowLoopback: false, deniedPorts: [] };
    assert.match((await post(`${base}/ok`, '{}', {}, closed, 2000)).error!, /loopback/);
    assert.match((await post(base.replace('127.0.0.1', 'localhost') + '/ok', '{}', {}, closed, 2000)).error!, /loopback/);
  });
});

test('when attempts keep failing, then the pause doubles from the base (±20 % jitter) up to the maximum', () => {
  assert.deepEqual([1, 2, 3, 4].map((n) => backoffMs(n, 1000, 5000, () => 0.5)), [1000, 2000, 4000, 5000]);
  assert.equal(backoffMs(1, 1000, 5000, () => 0), 800);
  assert.equal(backoffMs(1, 1000, 5000, () => 1), 1200);
});

for (const driver of await drivers()) {
  describe(`an endpoint that keeps failing, on ${driver.name}`, () => {
    let db: Database;
    let receiver: http.Server;
    let url = '';
    let status = 503;
    const attempts: number[] = [];
    const dataDir = tempDir('webhooks-disable');
    before(async () => {
      db = await openDatabase({ service: 'webhooks', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      receiver = http.createServer((req, res) => {
        req.resume();
        attempts.push(Date.now());
        res.writeHead(status).end();
      });
      await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`;
    });
    after(async () => {
      receiver.closeAllConnections();
      receiver.close();
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    test('when every attempt fails for WEBHOOK_DISABLE_AFTER_MS, then the endpoint is disabled with a note saying since when, and nothing more is sent to it; before that it is retried', async () => {
      const DISABLE_AFTER_MS = 800;
      const repo = new WebhookRepository(db.knex);
      const webhooks = new Webhooks({ repo, policy, onDeliveries: () => dispatcher.wake() });
      const dispatcher = new Dispatcher({ repo, logger, policy, timeoutMs: 1000, retryBaseMs: 50, retryMaxMs: 100, retryWindowMs: 60_000, disableAfterMs: DISABLE_AFTER_MS, pollMs: 20, concurrency: 2 });
      const { endpoint } = await webhooks.create('prj_fail', { url, eventTypes: [], description: '', enabled: true });
      dispatcher.start();
      try {
        await webhooks.record([{ id: 'evt_fail1', projectId: 'prj_fail', type: 'run.queued', orderingKey: 'run_1', sequence: 1, createdAt: new Date().toISOString(), dataJson: '{"id":"run_1"}' }]);
        const disabled = await until(async () => {
          const e = await webhooks.get('prj_fail', endpoint.id);
          return !e.enabled && e;
        }, { what: 'the endpoint disabled', timeoutMs: 15_000 });
        const seenDisabledAt = Date.now();
        const first = attempts[0]!;
        // How many attempts fit in the streak depends on the machine's speed (two on a loaded one): at least one retry.
        assert.ok(attempts.length >= 2, `retried before it was disabled (${attempts.length} attempts)`);
        const since = /^Every delivery failed since (\S+)$/.exec(disabled.disabledReason ?? '');
        assert.ok(since, disabled.disabledReason ?? 'no note');
        assert.ok(Math.abs(Date.parse(since[1]!) - first) < 500, `since its first failed attempt: ${since[1]} vs ${new Date(first).toISOString()}`);
        assert.ok(seenDisabledAt - Date.parse(since[1]!) >= DISABLE_AFTER_MS, 'not before the failing streak lasted its time');
        assert.ok(disabled.disabledAt);
        const seen = attempts.length;
        const [d] = (await webhooks.deliveries('prj_fail', endpoint.id, 10, '')).items;
        assert.equal(d!.status, 'pending', 'its delivery waits for the endpoint to be enabled again');
        assert.equal(d!.lastStatusCode, 503);
        // A disabled endpoint gets nothing: another event and several polls later, still no request.
        await webhooks.record([{ id: 'evt_fail2', projectId: 'prj_fail', type: 'run.started', orderingKey: 'run_1', sequence: 2, createdAt: new Date().toISOString(), dataJson: '{"id":"run_1"}' }]);
        await dispatcher.stop();
        assert.equal(attempts.length, seen);

        status = 200;
        const enabled = await webhooks.update('prj_fail', endpoint.id, { enabled: true });
        assert.equal(enabled.disabledReason, null, 'enabling it clears the note');
        const again = new Dispatcher({ repo, logger, policy, timeoutMs: 1000, retryBaseMs: 50, retryMaxMs: 100, retryWindowMs: 60_000, disableAfterMs: DISABLE_AFTER_MS, pollMs: 20, concurrency: 2 });
        again.start();
        try {
          await until(async () => (await webhooks.deliveries('prj_fail', endpoint.id, 10, '')).items.every((x) => x.status === 'succeeded'), { what: 'both delivered once enabled' });
        } finally {
          await again.stop();
        }
      } finally {
        await dispatcher.stop();
      }
    });
  });
}
