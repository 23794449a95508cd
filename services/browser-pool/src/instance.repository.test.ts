/** The pool instances table on every available driver: heartbeats, and reaping a dead instance's browsers once. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { BrowserRepository, type BrowserChangeHook, type NewBrowser } from './browser.repository.js';
import { InstanceRepository } from './instance.repository.js';
import { migrations } from './migrations.js';

const T0 = Date.parse('2030-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000);
const TIMEOUT_S = 20;
/** The cutoff a reaper uses at second `s`. */
const expiredBefore = (s: number) => at(s - TIMEOUT_S);

const newBrowser = (id: string, instanceId: string, projectId = 'prj_i'): NewBrowser => ({
  id,
  projectId,
  profileId: null,
  sessionId: null,
  runId: null,
  agent: null,
  screenWidth: 1280,
  screenHeight: 800,
  proxyCountryCode: null,
  stealth: true,
  locale: null,
  timezone: null,
  allowedDomains: null,
  blockAds: false,
  liveViewUrl: null,
  instanceId,
  pid: null,
  timeoutAt: at(3600).toISOString(),
});

for (const driver of await drivers()) {
  describe(`pool instances on ${driver.name}`, () => {
    let db: Database;
    let dir: string;
    let instances: InstanceRepository;
    let browsers: BrowserRepository;
    before(async () => {
      dir = tempDir('bp-instances');
      db = await openDatabase({ service: 'browser-pool', dataDir: dir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      // As the pool wires it: a browser's stop is recorded in the webhook outbox in the same transaction.
      const outbox: BrowserChangeHook = (trx, b, change) => recordOutboxEvent(trx, { projectId: b.projectId, type: change, orderingKey: b.id, data: { id: b.id, status: b.status } });
      instances = new InstanceRepository(db.knex, outbox);
      browsers = new BrowserRepository(db.knex, db.driver, outbox);
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test('when an instance registers and renews its heartbeat, then peers see its addresses and latest heartbeat; a restart under the same id takes the row over', async () => {
      await instances.register({ id: 'pool-a', grpcAddr: '10.0.0.1:50052', cdpUrl: 'ws://10.0.0.1:9222' }, at(0));
      assert.equal(await instances.heartbeat('pool-a', at(5)), true);
      await instances.setDraining('pool-a');
      let [row] = await instances.all();
      assert.deepEqual(row, { id: 'pool-a', grpcAddr: '10.0.0.1:50052', cdpUrl: 'ws://10.0.0.1:9222', draining: true, startedAt: at(0).toISOString(), heartbeatAt: at(5).toISOString() });
      await instances.register({ id: 'pool-a', grpcAddr: '10.0.0.9:50052', cdpUrl: 'ws://10.0.0.9:9222' }, at(60));
      [row] = await instances.all();
      assert.deepEqual(row, { id: 'pool-a', grpcAddr: '10.0.0.9:50052', cdpUrl: 'ws://10.0.0.9:9222', draining: false, startedAt: at(60).toISOString(), heartbeatAt: at(60).toISOString() });
      await instances.deregister('pool-a');
      assert.equal(await instances.heartbeat('pool-a', at(65)), false, 'a heartbeat of a removed instance says so');
      assert.deepEqual(await instances.all(), []);
    });

    test('when two replicas reap a dead instance at once, then its active browsers are stopped once, as owner_lost, and live ones are untouched', async () => {
      await instances.register({ id: 'pool-dead', grpcAddr: 'a:1', cdpUrl: 'ws://a:2' }, at(100));
      await instances.register({ id: 'pool-b', grpcAddr: 'b:1', cdpUrl: 'ws://b:2' }, at(100));
      await instances.register({ id: 'pool-c', grpcAddr: 'c:1', cdpUrl: 'ws://c:2' }, at(100));
      for (const id of ['brw_dead1', 'brw_dead2', 'brw_dead3']) await browsers.insertUnderCap(newBrowser(id, 'pool-dead'), 10, at(101));
      await browsers.insertUnderCap(newBrowser('brw_dead_stopped', 'pool-dead'), 10, at(101));
      await browsers.markStopped('brw_dead_stopped', 'user', at(102));
      await browsers.insertUnderCap(newBrowser('brw_alive_b', 'pool-b'), 10, at(101));
      await instances.heartbeat('pool-b', at(130));
      await instances.heartbeat('pool-c', at(130));

      assert.deepEqual(await instances.reapExpired('pool-b', expiredBefore(119), at(119)), { instances: [], browsers: [] }, 'not expired yet');
      const [b, c] = await Promise.all([instances.reapExpired('pool-b', expiredBefore(135), at(135)), instances.reapExpired('pool-c', expiredBefore(135), at(135))]);
      assert.deepEqual([...b.instances, ...c.instances], ['pool-dead'], 'one reaper took the instance');
      const stopped = [...b.browsers, ...c.browsers];
      assert.deepEqual(stopped.map((r) => r.id).sort(), ['brw_dead1', 'brw_dead2', 'brw_dead3'], 'each browser once');
      assert.ok(stopped.every((r) => r.status === 'stopped' && r.stopReason === 'owner_lost' && r.stoppedAt === at(135).toISOString()));
      const told = await db.knex('webhook_outbox').where({ type: 'browser.stopped' }).whereIn('ordering_key', ['brw_dead1', 'brw_dead2', 'brw_dead3']).pluck('ordering_key');
      assert.deepEqual(told.sort(), ['brw_dead1', 'brw_dead2', 'brw_dead3'], 'each reaped browser has one browser.stopped webhook event');
      assert.equal((await browsers.byId('brw_dead_stopped'))!.stopReason, 'user', 'a browser stopped before keeps its reason');
      assert.equal((await browsers.byId('brw_alive_b'))!.status, 'active');
      assert.deepEqual((await instances.all()).map((i) => i.id), ['pool-b', 'pool-c']);
      assert.ok(await browsers.insertUnderCap(newBrowser('brw_after', 'pool-b'), 3, at(136)), 'the reaped browsers no longer count against the cap');
    });

    test('when a peer is found dead before its heartbeat expired, then it is reaped with its browsers only if it did not beat again since it was judged', async () => {
      await instances.register({ id: 'pool-gone', grpcAddr: 'g:1', cdpUrl: 'ws://g:2' }, at(500));
      await instances.register({ id: 'pool-back', grpcAddr: 'k:1', cdpUrl: 'ws://k:2' }, at(500));
      await browsers.insertUnderCap(newBrowser('brw_gone1', 'pool-gone', 'prj_d'), 10, at(501));
      await browsers.insertUnderCap(newBrowser('brw_back1', 'pool-back', 'prj_d'), 10, at(501));
      await instances.heartbeat('pool-back', at(503)); // beat again after it was judged at 500
      assert.deepEqual(await instances.reapDead('pool-back', at(500), at(504)), { instances: [], browsers: [] });
      assert.equal((await browsers.byId('brw_back1'))!.status, 'active');
      const reaped = await instances.reapDead('pool-gone', at(500), at(504));
      assert.deepEqual([reaped.instances, reaped.browsers.map((b) => [b.id, b.stopReason])], [['pool-gone'], [['brw_gone1', 'owner_lost']]]);
      assert.deepEqual(await instances.reapDead('pool-gone', at(500), at(505)), { instances: [], browsers: [] }, 'once');
      assert.deepEqual(await db.knex('webhook_outbox').where({ type: 'browser.stopped', ordering_key: 'brw_gone1' }).count('* as n').then((r) => Number(r[0]!.n)), 1);
      await instances.deregister('pool-back');
    });

    test('when an active browser names an instance that has no row, then it is reaped once older than the timeout, never before', async () => {
      // Only this project's browsers are looked at: the instances of the test before expire here too.
      const ours = (r: { browsers: { projectId: string; id: string; stopReason: string | null }[] }) => r.browsers.filter((b) => b.projectId === 'prj_o');
      await instances.register({ id: 'pool-r', grpcAddr: 'r:1', cdpUrl: 'ws://r:2' }, at(300));
      await browsers.insertUnderCap(newBrowser('brw_orphan', 'pool-gone', 'prj_o'), 10, at(300));
      assert.deepEqual(ours(await instances.reapExpired('pool-r', expiredBefore(310), at(310))), [], 'young: its owner may be registering still');
      const reaped = await instances.reapExpired('pool-r', expiredBefore(325), at(325));
      assert.deepEqual(ours(reaped).map((r) => [r.id, r.stopReason]), [['brw_orphan', 'owner_lost']]);
      await browsers.insertUnderCap(newBrowser('brw_own', 'pool-r', 'prj_o'), 10, at(300));
      await instances.deregister('pool-r');
      assert.deepEqual(ours(await instances.reapExpired('pool-r', expiredBefore(400), at(400))), [], "a reaper never reaps its own browsers (its own start stops those)");
    });
  });
}
