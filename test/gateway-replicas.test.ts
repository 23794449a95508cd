/**
 * Two gateways and two webhooks services on one Postgres (one process of every other service): a
 * key revoked through one gateway fails at once on the other, an Idempotency-Key holds across
 * them — a create whose answer was lost on one gateway, retried on the other, gets the same run —
 * and the two webhooks replicas, sharing the deliveries, send each event once to each endpoint.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';

const pg = await postgresUrl();

describe('two gateways and two webhooks services on one Postgres', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let db: FreshDatabase;
  let gateways: [string, string];
  const receivers: WebhookReceiver[] = [];

  before(async () => {
    db = await freshDatabase(pg!, 'ats_gateways');
    f = await startStackFixture({
      databaseUrl: db.url,
      replicas: { gateway: 2, webhooks: 2 },
      projects: ['alpha'],
      env: { ...NOT_RECORDED, POOL_WARM_SIZE: '0', DEFAULT_MODEL: 'builtin', WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_MS: '100', WEBHOOK_OUTBOX_POLL_MS: '200' },
    });
    const second = f.stack.replicas.find((r) => r.service === 'gateway')!;
    gateways = [`http://127.0.0.1:${f.stack.gatewayPort}`, `http://127.0.0.1:${second.port}`];
  });
  after(async () => {
    await f?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await db?.drop();
  });

  const call = (at: string, key: string, path: string, init: RequestInit = {}) =>
    fetch(`${at}/api/v1${path}`, { ...init, headers: { 'x-service-api-key': key, 'content-type': 'application/json', ...init.headers } });

  test('when a key issued on one gateway is revoked there, then the other gateway refuses it on the next request', async () => {
    const [a, b] = gateways;
    const admin = f.projects.alpha!.key;
    const issued = (await (await call(a, admin, '/api-keys', { method: 'POST', body: JSON.stringify({ name: 'short-lived' }) })).json()) as { id: string; key: string };
    assert.equal((await call(b, issued.key, '/api-keys')).status, 200, 'the new key works on the other gateway');

    assert.equal((await call(a, admin, `/api-keys/${issued.id}`, { method: 'DELETE' })).status, 204);
    const after = await call(b, issued.key, '/api-keys');

    assert.equal(after.status, 401);
    assert.deepEqual(await after.json(), { detail: 'Invalid or missing API key' });
  });

  test('when a run create loses its answer on one gateway and is retried on the other with the same key, then the retry gets the same run and only one run exists', async () => {
    const [a, b] = gateways;
    const key = f.projects.alpha!.key;
    const task = `Open about:blank (${Date.now()})`;
    const body = JSON.stringify({ task });
    const runsWithTask = async () => ((await (await call(b, key, '/agents/browser-agent/runs?limit=200')).json()) as { items: { id: string; task: string }[] }).items.filter((r) => r.task === task);

    // The first request reaches gateway A, which creates the run; its answer is never read.
    const u = new URL(`${a}/api/v1/agents/browser-agent/runs`);
    const lost = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'x-service-api-key': key, 'content-type': 'application/json', 'idempotency-key': 'lost-answer-1', 'content-length': Buffer.byteLength(body) } });
    lost.on('error', () => undefined); // the cut this test makes
    lost.end(body);
    const [created] = await until(async () => {
      const runs = await runsWithTask();
      return runs.length ? runs : undefined;
    }, { what: 'the first request made its run' });
    lost.destroy();

    const retry = await call(b, key, '/agents/browser-agent/runs', { method: 'POST', headers: { 'idempotency-key': 'lost-answer-1' }, body });
    const parallel = await Promise.all(gateways.map((at) => call(at, key, '/agents/browser-agent/runs', { method: 'POST', headers: { 'idempotency-key': 'lost-answer-1' }, body })));

    assert.equal(retry.status, 202);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.equal(((await retry.json()) as { id: string }).id, created!.id);
    for (const res of parallel) assert.equal(((await res.json()) as { id: string }).id, created!.id);
    assert.equal((await runsWithTask()).length, 1, 'one run for four requests');
    await call(a, key, `/agents/browser-agent/runs/${created!.id}/stop`, { method: 'POST' });
  });
  test('when browser events and test pings go to two endpoints while two webhooks replicas share the deliveries, then each endpoint gets each event exactly once, signed', { timeout: 120_000 }, async () => {
    const key = f.projects.alpha!.key;
    const post = (at: string, path: string, body?: unknown) => call(at, key, path, { method: 'POST', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const pair = [await startWebhookReceiver(), await startWebhookReceiver()];
    receivers.push(...pair);
    const hooks = await Promise.all(
      pair.map(async (r, i) => {
        const res = await post(gateways[i]!, '/webhooks', { url: r.url, event_types: ['browser.created', 'browser.stopped'] });
        assert.equal(res.status, 201, await res.clone().text());
        return (await res.json()) as { id: string; secret: string };
      }),
    );
    const BROWSERS = 3;
    const PINGS = 10;
    const browsers: string[] = [];
    for (let i = 0; i < BROWSERS; i++) {
      const created = await post(gateways[i % 2]!, '/browsers', {});
      assert.equal(created.status, 201, await created.clone().text());
      browsers.push(((await created.json()) as { id: string }).id);
    }
    // Pings from both gateways at once: deliveries the two dispatchers race to claim.
    await Promise.all(hooks.flatMap((h) => Array.from({ length: PINGS }, (_, i) => post(gateways[i % 2]!, `/webhooks/${h.id}/test`).then((r) => assert.equal(r.status, 202)))));
    for (const [i, id] of browsers.entries()) assert.equal((await post(gateways[i % 2]!, `/browsers/${id}/stop`)).status, 200);

    const expected = BROWSERS * 2 + PINGS;
    // An earlier test's run may add its browser's events: only this test's count.
    const mine = (x: { body: string }) => {
      const e = JSON.parse(x.body) as { type: string; data: { id?: string } };
      return e.type === 'webhook.test' || browsers.includes(e.data.id ?? '');
    };
    for (const [i, h] of hooks.entries()) {
      const r = pair[i]!;
      await until(() => r.received.filter(mine).length >= expected, { what: `${expected} events at endpoint ${i + 1}`, timeoutMs: 60_000 });
      await until(async () => {
        const d = (await (await call(gateways[i]!, key, `/webhooks/${h.id}/deliveries?limit=200`)).json()) as { items: { status: string }[] };
        return d.items.every((x) => x.status === 'succeeded');
      }, { what: `every delivery to endpoint ${i + 1} settled` });
      const ids = r.received.map((x) => x.headers['webhook-id']);
      assert.equal(new Set(ids).size, ids.length, 'no event sent twice');
      assert.equal(r.received.filter(mine).length, expected);
      for (const x of r.received) new Webhook(h.secret).verify(x.body, x.headers);
      const browserEvents = r.received.filter(mine).map((x) => JSON.parse(x.body) as { type: string; data: { id: string } }).filter((e) => e.type.startsWith('browser.'));
      assert.deepEqual(browserEvents.map((e) => `${e.data.id} ${e.type}`).sort(), browsers.flatMap((id) => [`${id} browser.created`, `${id} browser.stopped`]).sort(), 'created and stopped of each browser');
    }
  });
});
