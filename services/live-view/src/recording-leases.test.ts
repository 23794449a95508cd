/**
 * Leases on recordings, on both database drivers: a holder keeps its recordings while it renews;
 * past the lease exactly one taker gets each; a holder that was taken over can change nothing;
 * a clean stop lets go at once; a second live process of one instance id is refused, a dead one
 * is succeeded (at once when it ran on this host); a starting replica leaves other instances' scratch and encoders alone.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { within } from '../../../test/support/until.js';
import { processIdentity } from '../../common/src/process-start.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { createLogger } from '../../common/src/logger.js';
import { Ffmpeg } from './ffmpeg.js';
import { PartStore, scratchDir } from './part-store.js';
import type { FrameSource } from './pool-client.js';
import { Recorder } from './recorder.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { RecordingRepository, migrations, type Holder } from './recording.repository.js';
import { Finalizer } from './recording-finalizer.js';
import { DuplicateInstanceError, RecordingLeases, type LeaseListener } from './recording-leases.js';
import { FolderStore } from './recording-store.fake.js';

const logger = createLogger('test', process.env.TEST_LOG ?? 'silent');
const LEASE = 1000;

/** A repository whose lease clock the test moves. */
function clocked(db: Database, start: number) {
  const clock = { ms: start };
  return { repo: new RecordingRepository(db.knex, { now: () => clock.ms }), clock };
}

const holder = (instanceId: string, nonce = `${instanceId}-n`): Holder => ({ instanceId, nonce });
const recording = (browserId: string) => ({ browserId, projectId: 'prj_1', startedAtMs: 1 });
const idle: LeaseListener = { writing: () => [], lost: () => {}, taken: () => {} };

for (const driver of await drivers()) {
  describe(`recording leases on ${driver.name}`, () => {
    let db: Database;
    const dataDir = tempDir('leases');
    before(async () => {
      db = await openDatabase({ service: 'live-view', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    test('when the holder renews, then nobody takes its recording; when it stops renewing past the lease, then one of two takers gets it and the old holder can change nothing', async () => {
      const { repo, clock } = clocked(db, Date.parse('2026-01-01T00:00:00Z'));
      const a = holder('lv-a');
      assert.equal(await repo.claim(recording('brw_l1'), a, LEASE), true);
      assert.equal(await repo.claim(recording('brw_l1'), holder('lv-b'), LEASE), false, 'claimed once');

      clock.ms += 900;
      assert.deepEqual([...(await repo.renewLeases(a, LEASE))], ['brw_l1']);
      clock.ms += 900;
      assert.deepEqual(await repo.expired(10), [], 'renewed: still held');
      assert.equal(await repo.takeOver('brw_l1', holder('lv-b'), LEASE), undefined);

      clock.ms += 200; // 1100 ms since the renewal
      assert.deepEqual((await repo.expired(10)).map((r) => r.browserId), ['brw_l1']);
      const [b, c] = await Promise.all([repo.takeOver('brw_l1', holder('lv-b'), LEASE), repo.takeOver('brw_l1', holder('lv-c'), LEASE)]);
      assert.equal([b, c].filter(Boolean).length, 1, 'one taker wins');
      const winner = (b ?? c)!.instanceId === 'lv-b' ? holder('lv-b') : holder('lv-c');

      assert.deepEqual([...(await repo.renewLeases(a, LEASE))], [], 'the old holder learns it lost it');
      const part = { browserId: 'brw_l1', seq: 1, startMs: 1, fps: 10, file: '/x', objectKey: 'k' };
      assert.equal(await repo.addPart(a, part), false);
      assert.equal(await repo.markStopped(a, 'brw_l1', 5), false);
      assert.equal(await repo.addPart(winner, part), true);
      assert.equal(await repo.partStored(a, 'brw_l1', 1, { durationMs: 1, sizeBytes: 1 }), false);
      assert.equal(await repo.markStopped(winner, 'brw_l1', 5), true);
      assert.equal((await repo.get('brw_l1'))?.state, 'finalizing');
    });

    test('when a recording is marked ready, then its recording.ready event commits with it: a failing event write leaves it finalizing, and a holder taken over writes neither', async () => {
      const { repo, clock } = clocked(db, Date.parse('2026-01-01T00:00:00Z'));
      const a = holder('lv-ready');
      await repo.claim(recording('brw_r1'), a, LEASE);
      assert.equal(await repo.markStopped(a, 'brw_r1', 5), true);
      const outbox = () => db.knex('webhook_outbox').where({ ordering_key: 'brw_r1' }).select('type', 'data');
      const event = (trx: Parameters<typeof recordOutboxEvent>[0]) => recordOutboxEvent(trx, { projectId: 'prj_1', type: 'recording.ready', orderingKey: 'brw_r1', data: { id: 'brw_r1' } });
      const stored = { objectKey: 'recordings/brw_r1.mp4', sizeBytes: 10, durationMs: 100 };

      await assert.rejects(repo.markReady(a, 'brw_r1', stored, async (trx) => (await event(trx), Promise.reject(new Error('outbox unavailable')))), /outbox unavailable/);
      assert.equal((await repo.get('brw_r1'))?.state, 'finalizing', 'not fetchable without its event');
      assert.deepEqual(await outbox(), []);

      clock.ms += LEASE + 1;
      const b = holder('lv-ready-b');
      assert.ok(await repo.takeOver('brw_r1', b, LEASE));
      assert.equal(await repo.markReady(a, 'brw_r1', stored, event), false, 'the old holder is fenced out');
      assert.deepEqual(await outbox(), []);

      assert.equal(await repo.markReady(b, 'brw_r1', stored, event), true);
      assert.equal((await repo.get('brw_r1'))?.state, 'ready');
      assert.deepEqual(await outbox(), [{ type: 'recording.ready', data: '{"id":"brw_r1"}' }]);
    });

    test('when a holder stops cleanly, then its recordings can be taken over at once', async () => {
      const { repo } = clocked(db, Date.now());
      const leases = new RecordingLeases({ repo, instanceId: 'lv-clean', leaseMs: 60_000, renewMs: 10_000, logger });
      await leases.start();
      await repo.claim(recording('brw_l2'), leases.holder, 60_000);
      await leases.stop();
      assert.ok((await repo.expired(100)).some((r) => r.browserId === 'brw_l2'));
      assert.equal((await repo.instance('lv-clean'))?.stopped, true, 'the next process of this id need not wait');
    });

    test('when a step of a recording fails, then its lease is let go: not renewed by its holder, and the next scan takes it over (the holder included)', async () => {
      const { repo } = clocked(db, Date.now());
      const a = holder('lv-fail');
      await repo.claim(recording('brw_l3'), a, LEASE);
      assert.equal(await repo.letGo(a, 'brw_l3'), true);
      assert.equal((await repo.renewLeases(a, LEASE)).has('brw_l3'), false, 'the holder no longer renews it');
      assert.ok((await repo.expired(100)).some((r) => r.browserId === 'brw_l3'), 'a scan finds it');
      assert.equal((await repo.takeOver('brw_l3', a, LEASE))?.browserId, 'brw_l3', 'taken over again, to try again');
      assert.equal(await repo.letGo(holder('lv-other'), 'brw_l3'), false, 'only its holder lets it go');
    });

    test('when a second process starts with the instance id of a live one, then it refuses to start, naming the variable: by its pid on this host, by its beats when its process is unsaid', async () => {
      const repo = new RecordingRepository(db.knex);
      for (const [instanceId, process] of [['lv-twin-here', undefined], ['lv-twin-unsaid', null]] as const) {
        // Unsaid (as from another host), the twin watches three renewals for a beat: 300 ms, so that a busy host's late beat is not read as a death.
        const live = new RecordingLeases({ repo, instanceId, leaseMs: 1000, renewMs: 100, logger, process });
        await live.start();
        live.listen(idle);
        try {
          const twin = new RecordingLeases({ repo, instanceId, leaseMs: 1000, renewMs: 100, logger });
          await assert.rejects(twin.start(), (err: Error) => err instanceof DuplicateInstanceError && err.message.includes(`LIVE_VIEW_INSTANCE_ID=${instanceId} is in use`));
        } finally {
          await live.stop();
        }
      }
    });

    test('when the process of an instance ran on this host, then a next one of that id is refused while it runs and succeeds it at once when it is gone, watching for no beat', async () => {
      const repo = new RecordingRepository(db.knex);
      const child = spawn('sleep', ['60'], { stdio: 'ignore' });
      try {
        await once(child, 'spawn');
        const running = holder('lv-here', 'running');
        await repo.registerInstance(running, processIdentity(child.pid));
        await repo.claim(recording('brw_lv-here'), running, 600_000);
        // Renewals of five minutes: a successor that watched for beats would wait a quarter of an hour.
        const next = () => new RecordingLeases({ repo, instanceId: 'lv-here', leaseMs: 600_000, renewMs: 300_000, logger });
        await assert.rejects(within(next().start(), 'the refusal'), DuplicateInstanceError);
        child.kill('SIGKILL');
        await once(child, 'exit');
        const successor = next();
        assert.equal(await within(successor.start(), 'the successor’s start'), 1, 'it took over the recording at once');
        assert.deepEqual((await repo.held(successor.holder)).map((r) => r.browserId), ['brw_lv-here']);
        await successor.stop();
      } finally {
        child.kill('SIGKILL');
      }
    });

    test('when the process of an instance died, then the next one of that id takes over its recordings, at once or once sure it is gone', async () => {
      const now = Date.now();
      for (const [id, diedMsAgo] of [['lv-long-dead', 60_000], ['lv-just-dead', 50]] as const) {
        const { repo: then } = clocked(db, now - diedMsAgo);
        const dead = holder(id, 'dead');
        await then.registerInstance(dead);
        await then.claim(recording(`brw_${id}`), dead, 400);
        const { repo } = clocked(db, now);
        const next = new RecordingLeases({ repo, instanceId: id, leaseMs: 400, renewMs: 50, logger });
        assert.equal(await next.start(), 1);
        assert.deepEqual((await repo.held(next.holder)).map((r) => r.browserId), [`brw_${id}`]);
        await next.stop();
      }
    });

    test('when a replica starts beside others on one disk, then it leaves a live instance’s scratch and encoders alone and removes only a long-gone one’s', async () => {
      const root = path.join(dataDir, 'recordings');
      const { repo, clock } = clocked(db, Date.now());
      // lv-live is alive and writing a part; lv-gone stopped two hours ago.
      await repo.registerInstance(holder('lv-live'));
      const livePart = path.join(scratchDir(root, 'lv-live'), 'brw_s1', 'part-00001.ts');
      fs.mkdirSync(path.dirname(livePart), { recursive: true });
      fs.writeFileSync(livePart, 'being written');
      const encoder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', livePart], { stdio: 'ignore' });
      fs.writeFileSync(`${livePart}.pid`, String(encoder.pid));
      clock.ms -= 2 * 3600_000;
      await repo.registerInstance(holder('lv-gone'));
      clock.ms += 2 * 3600_000;
      fs.mkdirSync(path.join(scratchDir(root, 'lv-gone'), 'brw_s2'), { recursive: true });

      const ffmpeg = new Ffmpeg({ ffmpegPath: 'ffmpeg', ffprobePath: 'ffprobe' });
      const store = new FolderStore(path.join(dataDir, 'objects'));
      const leases = new RecordingLeases({ repo, instanceId: 'lv-new', leaseMs: LEASE, renewMs: 200, logger });
      const parts = new PartStore({ repo, store, ffmpeg, holder: leases.holder, dir: scratchDir(root, 'lv-new'), logger });
      const finalizer = new Finalizer({ repo, store, ffmpeg, parts, concurrency: 1, logger });
      const source = { listRecordable: async () => ({ items: [], nextCursor: '' }), getBrowser: async () => undefined } as unknown as FrameSource;
      const settings = { ffmpegPath: 'ffmpeg', fps: 10, crf: 30, preset: 'ultrafast', dir: root, maxWidth: 640, maxHeight: 640, partMs: 1000 };
      const recorder = new Recorder({ repo, source, finalizer, ffmpeg, settings, parts, leases, logger });
      try {
        await recorder.start(undefined, false);
        assert.equal(encoder.exitCode, null, 'the live instance’s encoder still runs');
        assert.ok(fs.existsSync(livePart) && fs.existsSync(`${livePart}.pid`), 'its part is untouched');
        assert.equal(fs.existsSync(scratchDir(root, 'lv-gone')), false, 'the long-gone instance’s scratch is removed');
        assert.ok(fs.existsSync(scratchDir(root, 'lv-new')));
      } finally {
        await recorder.stop();
        await finalizer.stop(100);
        await leases.stop();
        encoder.kill('SIGKILL');
      }
    });
  });
}
