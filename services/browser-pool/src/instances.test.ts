/** A peer that refuses connections: dead at once, or (its browsers outliving it) only after the restart grace. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { InternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { BrowserRepository } from './browser.repository.js';
import { InstanceRepository } from './instance.repository.js';
import { Instances } from './instances.js';
import { migrations } from './migrations.js';

const logger = createLogger('test', 'silent');
let db: Database;
let dataDir: string;
let now = Date.now();

before(async () => {
  dataDir = tempDir('bp-instances');
  db = await openDatabase({ service: 'browser-pool', dataDir, migrations, logger });
});
after(async () => {
  await db?.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** host:port where nothing listens (a port just given back). */
async function refusingAddress(): Promise<string> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `127.0.0.1:${port}`;
}

const peer = (id: string, restartGraceMs: number) =>
  new Instances({ repo: new InstanceRepository(db.knex), id, heartbeatIntervalMs: 3_600_000, heartbeatTimeoutMs: 600_000, restartGraceMs, token: InternalToken.generate(), grpcDeadlineMs: 2000, logger, now: () => now, onReaped: () => {}, onBeat: () => {} });

test('when a peer whose browsers outlive it refuses connections, then it is left alone within the restart grace and reaped (its browsers owner_lost) after it; with no grace at once', async () => {
  const browsers = new BrowserRepository(db.knex, db.driver);
  const repo = new InstanceRepository(db.knex);
  for (const id of ['restarting', 'gone']) {
    await repo.register({ id, grpcAddr: await refusingAddress(), cdpUrl: 'ws://127.0.0.1:1' }, new Date(now));
    await browsers.insertUnderCap({ id: `brw_${id}`, projectId: 'prj_i', profileId: null, sessionId: null, runId: null, agent: null, screenWidth: 800, screenHeight: 600, proxyCountryCode: null, stealth: true, locale: null, timezone: null, allowedDomains: null, blockAds: false, liveViewUrl: null, instanceId: id, pid: null, timeoutAt: new Date(now + 3_600_000).toISOString() }, 10, new Date(now));
  }
  const graceful = peer('judge-grace', 60_000);
  assert.equal(await graceful.confirmDead('restarting'), false, 'within the grace: maybe restarting');
  assert.equal((await browsers.byId('brw_restarting'))!.status, 'active');
  now += 61_000;
  assert.equal(await graceful.confirmDead('restarting'), true, 'past the grace it is dead');
  const reaped = (await browsers.byId('brw_restarting'))!;
  assert.deepEqual([reaped.status, reaped.stopReason], ['stopped', 'owner_lost']);

  await repo.heartbeat('gone', new Date(now));
  assert.equal(await peer('judge-now', 0).confirmDead('gone'), true, 'no grace: a refusing peer is dead at once');
  assert.equal((await browsers.byId('brw_gone'))!.stopReason, 'owner_lost');
});

test('when a restarted instance takes its browsers over for longer than the heartbeat timeout, then its row is renewed meanwhile and peers do not reap it', async () => {
  const browsers = new BrowserRepository(db.knex, db.driver);
  const repo = new InstanceRepository(db.knex);
  await repo.register({ id: 'restarted', grpcAddr: await refusingAddress(), cdpUrl: 'ws://127.0.0.1:1' }, new Date(now));
  await browsers.insertUnderCap({ id: 'brw_restarted', projectId: 'prj_i', profileId: null, sessionId: null, runId: null, agent: null, screenWidth: 800, screenHeight: 600, proxyCountryCode: null, stealth: true, locale: null, timezone: null, allowedDomains: null, blockAds: false, liveViewUrl: null, instanceId: 'restarted', pid: null, timeoutAt: new Date(now + 3_600_000).toISOString() }, 10, new Date(now));
  const restarted = new Instances({ repo, id: 'restarted', heartbeatIntervalMs: 20, heartbeatTimeoutMs: 600_000, restartGraceMs: 0, token: InternalToken.generate(), grpcDeadlineMs: 2000, logger, now: () => now, onReaped: () => {}, onBeat: () => {} });
  try {
    assert.equal(await restarted.resume(), true);
    // The takeover goes on past the timeout: by then the row must say the instance still beats.
    now += 700_000;
    await until(async () => (await repo.all()).find((r) => r.id === 'restarted')?.heartbeatAt === new Date(now).toISOString(), { what: 'the row renewed during the takeover' });
    const reaped = await peer('judge-takeover', 0).reap();
    assert.deepEqual(reaped.instances, [], 'not taken for dead');
    assert.equal((await browsers.byId('brw_restarted'))!.status, 'active', 'its browser is still active');
  } finally {
    await restarted.stop({ keepRow: true });
  }
});
