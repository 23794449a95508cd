/**
 * Two gateways on one Postgres (one process of every other service): a key revoked through one
 * fails at once on the other, and an Idempotency-Key holds across them — a create whose answer was
 * lost on one gateway, retried on the other, gets the same run.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const pg = await postgresUrl();

describe('two gateways on one Postgres', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let db: FreshDatabase;
  let gateways: [string, string];

  before(async () => {
    db = await freshDatabase(pg!, 'ats_gateways');
    f = await startStackFixture({ databaseUrl: db.url, replicas: { gateway: 2 }, projects: ['alpha'], env: { POOL_WARM_SIZE: '0', DEFAULT_MODEL: 'builtin' } });
    const second = f.stack.replicas.find((r) => r.service === 'gateway')!;
    gateways = [`http://127.0.0.1:${f.stack.gatewayPort}`, `http://127.0.0.1:${second.port}`];
  });
  after(async () => {
    await f?.stop();
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
});
