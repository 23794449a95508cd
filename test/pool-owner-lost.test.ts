/**
 * A pool replica whose process dies is seen dead at once, not after its heartbeat expires: two
 * pool replicas on one Postgres with a heartbeat timeout far longer than the test, browsers on
 * the second, and the second killed. Its browsers read stopped (owner_lost) through the API,
 * their cdpUrl no longer answers 502 but 404, a browser on the first replica is untouched, and the
 * project's slots are free again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent } from '../gen/ats/common/v1/common.js';
import { BrowserPoolServiceService } from '../gen/ats/browserpool/v1/browser_pool.js';
import { upgradeStatus } from '../services/browser-pool/src/testing/upgrade-status.js';
import { createServiceClient } from '../services/common/src/grpc.js';
import { CREATE_DEADLINE_MS } from '../services/run/src/browser-capacity.js';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const pg = await postgresUrl();
/** Far longer than the test: a browser read stopped within it was not reaped by the timeout. */
const HEARTBEAT_TIMEOUT_MS = 600_000;

describe('a pool replica that dies', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let fresh: FreshDatabase;

  before(async () => {
    fresh = await freshDatabase(pg!, 'ats_owner_lost');
    f = await startStackFixture({
      databaseUrl: fresh.url,
      replicas: { 'browser-pool': 2 },
      projects: ['main'],
      // Replicas as on separate nodes: a dead one's browsers cannot be taken over by a restart.
      env: { ...NOT_RECORDED, POOL_WARM_SIZE: '0', MAX_ACTIVE_BROWSERS_PER_PROJECT: '3', POOL_HEARTBEAT_INTERVAL_MS: '1000', POOL_HEARTBEAT_TIMEOUT_MS: String(HEARTBEAT_TIMEOUT_MS), POOL_KEEP_BROWSERS_ON_EXIT: 'false' },
    });
  });
  after(async () => {
    await f?.stop();
    await fresh?.drop();
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await f.api(`/api/v1${path}`, { method, key: f.projects.main!.key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  /** A browser created on pool replica `n`, asked of that replica directly (a balancer decides where the gateway's calls go). */
  const createOn = async (n: number): Promise<{ id: string; cdpUrl: string }> => {
    const port = n === 1 ? f.stack.ports.get('browser-pool')! : f.stack.replicas.find((r) => r.service === 'browser-pool' && r.n === n)!.port;
    const pool = createServiceClient(BrowserPoolServiceService, `127.0.0.1:${port}`, CREATE_DEADLINE_MS, f.stack.internalToken);
    try {
      const { browser } = await pool.api.createBrowser({ projectId: f.projects.main!.projectId, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] });
      return { id: browser!.id, cdpUrl: browser!.cdpUrl };
    } finally {
      pool.close();
    }
  };
  test('when a pool replica is killed, then its browsers read stopped (owner_lost) long before its heartbeat expires, their cdpUrl says 404, the other replica\'s browser is untouched and the slots are free', async () => {
    const kept = await createOn(1);
    const lost = [await createOn(2), await createOn(2)];
    assert.equal((await api('POST', '/browsers', {})).status, 429, 'the project is at its limit of 3');
    const killedAt = Date.now();
    await f.stack.kill('browser-pool', 2);

    for (const b of lost) {
      const read = await until(
        async () => {
          const r = await api('GET', `/browsers/${b.id}`);
          assert.equal(r.status, 200, JSON.stringify(r.body));
          return r.body.status === 'stopped' && r.body;
        },
        { timeoutMs: 30_000, intervalMs: 200, what: `${b.id} read stopped` },
      );
      assert.equal(read.stopReason, 'owner_lost', 'the record says why');
    }
    assert.ok(Date.now() - killedAt < HEARTBEAT_TIMEOUT_MS, 'not by the heartbeat timeout');
    assert.equal(await upgradeStatus(lost[0]!.cdpUrl), 404, 'a stopped browser, not a 502');
    assert.equal((await api('GET', `/browsers/${kept.id}`)).body.status, 'active');
    const listed = await api('GET', '/browsers?status=active');
    assert.deepEqual(listed.body.items.map((b: { id: string }) => b.id), [kept.id]);
    const again = await api('POST', '/browsers', {});
    assert.equal(again.status, 201, 'the lost browsers no longer count against the limit');
    for (const id of [kept.id, again.body.id]) assert.equal((await api('POST', `/browsers/${id}/stop`)).status, 200);
  });
});
