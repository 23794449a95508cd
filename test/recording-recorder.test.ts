/**
 * The recorder in-process with real ffmpeg, a real database and a stand-in pool on real gRPC:
 * the video lasts from the browser's creation to its stop and shows each frame when it was on
 * screen, encoding a still screen once; a lost `stopped` event still ends the recording; a restart
 * after the browser stopped fills the gap with the last frame; a replica that loses the lease
 * stops writing and the one taking over carries the video on from the stored parts; a browser
 * nobody told the recorder of is found in the pool; a browser that never showed anything is a
 * black picture for its life.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openDatabase, type Database } from '../services/common/src/db.js';
import { createLogger } from '../services/common/src/logger.js';
import { recordOutboxEvent } from '../services/common/src/outbox.js';
import { Ffmpeg } from '../services/live-view/src/ffmpeg.js';
import { createPoolClient, type FrameSource } from '../services/live-view/src/pool-client.js';
import { FakePool } from '../services/live-view/src/pool.fake.js';
import { PartStore, scratchDir } from '../services/live-view/src/part-store.js';
import { Recorder } from '../services/live-view/src/recorder.js';
import { RecordingRepository, migrations } from '../services/live-view/src/recording.repository.js';
import { Finalizer, type FinalizerOptions } from '../services/live-view/src/recording-finalizer.js';
import { RecordingLeases } from '../services/live-view/src/recording-leases.js';
import { recordingKey } from '../services/live-view/src/recording-store.js';
import { FolderStore } from '../services/live-view/src/recording-store.fake.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

const logger = createLogger('test', process.env.TEST_LOG ?? 'silent');
const PROJECT = 'prj_rec';
const FPS = 10;

let dir: string;
let db: Database;
let repo: RecordingRepository;
let RED: Buffer;
let BLUE: Buffer;
/** file-storage stand-in, shared by every recorder (as object storage is by every replica). */
let store: FolderStore;

function jpeg(colour: string): Buffer {
  const out = spawnSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', `color=c=${colour}:s=320x200`, '-frames:v', '1', '-f', 'image2pipe', '-c:v', 'mjpeg', 'pipe:1']);
  assert.equal(out.status, 0, String(out.stderr));
  return out.stdout;
}

before(async () => {
  dir = tempDir('recorder');
  db = await openDatabase({ service: 'live-view', dataDir: dir, migrations });
  repo = new RecordingRepository(db.knex);
  store = new FolderStore(path.join(dir, 'stored'));
  [RED, BLUE] = [jpeg('red'), jpeg('blue')];
});
after(async () => {
  await db.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** One pool browser and a recorder process (a restart is a second recorder on the same database and folder). */
async function world(browserId: string) {
  const pool = new FakePool(PROJECT, browserId, logger);
  const source: FrameSource = createPoolClient(`127.0.0.1:${await pool.server.listen('127.0.0.1', 0)}`, 5000, pool.token);
  const recorders: { recorder: Recorder; finalizer: Finalizer; ffmpeg: Ffmpeg; leases: RecordingLeases }[] = [];
  /** A recorder process of instance `instanceId` (another id: another replica), with its own clock for leases. */
  const startRecorder = async (instanceId = 'test', o: { leaseMs?: number; now?: () => number; partMs?: number; announceReady?: FinalizerOptions['announceReady']; maxAttempts?: number } = {}) => {
    const ffmpeg = new Ffmpeg({ ffmpegPath: 'ffmpeg', ffprobePath: 'ffprobe' });
    const instanceRepo = o.now ? new RecordingRepository(db.knex, { now: o.now }) : repo;
    const leaseMs = o.leaseMs ?? 20000;
    const leases = new RecordingLeases({ repo: instanceRepo, instanceId, leaseMs, renewMs: Math.min(200, leaseMs / 2), logger });
    const parts = new PartStore({ repo: instanceRepo, store, ffmpeg, holder: leases.holder, dir: scratchDir(path.join(dir, 'parts'), instanceId), logger });
    const finalizer = new Finalizer({ repo: instanceRepo, store, ffmpeg, parts, concurrency: 1, logger, retryBaseMs: 50, announceReady: o.announceReady, maxAttempts: o.maxAttempts });
    const settings = { ffmpegPath: 'ffmpeg', fps: FPS, crf: 30, preset: 'ultrafast', dir: path.join(dir, 'parts'), maxWidth: 1280, maxHeight: 1280, partMs: o.partMs ?? 10000 };
    const recorder = new Recorder({ repo: instanceRepo, source, finalizer, ffmpeg, settings, parts, leases, logger });
    await recorder.start(undefined);
    recorders.push({ recorder, finalizer, ffmpeg, leases });
    return recorder;
  };
  /** Stops a recorder process as SIGTERM does. */
  const stopRecorder = async (recorder: Recorder) => {
    const r = recorders.find((x) => x.recorder === recorder)!;
    await r.recorder.stop();
    await r.finalizer.stop(1000);
    await r.leases.stop();
    r.ffmpeg.stop();
  };
  return {
    pool,
    startRecorder,
    stopRecorder,
    /** Waits for the recording's own stream (the recorder opened it). */
    streaming: () => until(() => pool.openStreams.some((s) => s.purpose === 'recording')),
    async stop() {
      for (const r of recorders) {
        await r.recorder.stop();
        await r.finalizer.stop(1000);
        await r.leases.stop();
        r.ffmpeg.stop();
      }
      source.close();
      await pool.server.stop(100);
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ready = (browserId: string) => until(async () => ((await repo.get(browserId))?.state === 'ready' ? store.file(PROJECT, recordingKey(browserId)) : undefined));

function durationS(file: string): number {
  return Number(spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file], { encoding: 'utf8' }).stdout);
}

/**
 * A filter picking what is on screen at `atS`. The video has a frame only where the picture
 * changed, so a seek would skip to the next change: resample to a steady rate first.
 */
function at(atS: number, then: string): string {
  return `fps=100,trim=start=${atS},${then}`;
}

function frames(file: string): number {
  return Number(spawnSync('ffprobe', ['-v', 'error', '-count_packets', '-show_entries', 'stream=nb_read_packets', '-of', 'csv=p=0', file], { encoding: 'utf8' }).stdout);
}

/** Mean brightness (0–255) at `atS`. */
function brightness(file: string, atS: number): number {
  return spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-frames:v', '1', '-vf', at(atS, 'scale=1:1'), '-f', 'rawvideo', '-pix_fmt', 'gray', 'pipe:1']).stdout[0]!;
}

/** 'red' or 'blue': which of the two pictures the video shows at `atS`. */
function shows(file: string, atS: number): string {
  const px = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-frames:v', '1', '-vf', at(atS, 'scale=1:1'), '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1']).stdout;
  return px[0]! > px[2]! ? 'red' : 'blue';
}

test('when frames come only on change and the browser stops, then the video runs from start to stop with each picture at its time', async () => {
  const w = await world('brw_plain');
  try {
    const recorder = await w.startRecorder();
    const t0 = Date.now();
    w.pool.createdAtMs = t0;
    recorder.onStarted({ browserId: 'brw_plain', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: t0 + 200 }, 'recording');
    w.pool.push({ jpeg: BLUE, timestampMs: t0 + 1500 }, 'recording');
    await sleep(t0 + 2000 - Date.now());
    recorder.onStopped({ browserId: 'brw_plain', projectId: PROJECT, tsMs: t0 + 2500 });
    const file = await ready('brw_plain');
    assert.ok(Math.abs(durationS(file) - 2.5) < 0.06, `2.5 s (got ${durationS(file)})`);
    assert.deepEqual([0.05, 1.0, 1.39, 1.51, 2.4].map((s) => shows(file, s)), ['red', 'red', 'red', 'blue', 'blue']);
    assert.equal(frames(file), 3, 'red, blue and the closing repeat: a still screen is not encoded again and again');
    await until(() => !fs.existsSync(path.join(dir, 'parts', 'test', 'brw_plain'))); // the parts go once the MP4 is stored
    assert.deepEqual(store.keys(PROJECT, 'recordings/parts/brw_plain'), [], 'and so do the stored parts');
  } finally {
    await w.stop();
  }
});

test('when the stopped event is lost, then the end of the frame stream closes the recording at the stop time', async () => {
  const w = await world('brw_lost_event');
  try {
    const recorder = await w.startRecorder();
    const t0 = Date.now();
    w.pool.createdAtMs = t0;
    recorder.onStarted({ browserId: 'brw_lost_event', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: t0 + 100 }, 'recording');
    await sleep(1000);
    w.pool.stop(t0 + 1800);
    const file = await ready('brw_lost_event');
    assert.ok(Math.abs(durationS(file) - 1.8) < 0.06, `1.8 s (got ${durationS(file)})`);
  } finally {
    await w.stop();
  }
});

test('when a still screen outlasts a part and the stop is learnt seconds after it, then the video still ends at the stop', async () => {
  const w = await world('brw_late_stop');
  try {
    const recorder = await w.startRecorder('test', { partMs: 500 });
    const t0 = Date.now();
    w.pool.createdAtMs = t0;
    recorder.onStarted({ browserId: 'brw_late_stop', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: t0 + 100 }, 'recording');
    // The pool says the browser lives (a message with no picture) until its stop is recorded at 1.5 s ...
    for (let ms = 300; ms <= 1500; ms += 300) {
      await sleep(t0 + ms - Date.now());
      w.pool.push({ timestampMs: t0 + ms }, 'recording');
    }
    // ... then its shutdown (profile, downloads, the process) takes seconds before the stream ends.
    await sleep(t0 + 4500 - Date.now());
    assert.ok((await repo.parts('brw_late_stop')).length >= 2, 'the still screen was cut into parts meanwhile');
    w.pool.stop(t0 + 1500);
    const file = await ready('brw_late_stop');
    assert.ok(Math.abs(durationS(file) - 1.5) < 0.06, `1.5 s, the browser's life (got ${durationS(file)})`);
  } finally {
    await w.stop();
  }
});

test('when live-view restarts after the browser stopped, then the recording is closed with the last picture up to the stop', async () => {
  const w = await world('brw_restart');
  try {
    const first = await w.startRecorder();
    const t0 = Date.now();
    w.pool.createdAtMs = t0;
    first.onStarted({ browserId: 'brw_restart', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: t0 + 100 }, 'recording');
    w.pool.push({ jpeg: BLUE, timestampMs: t0 + 600 }, 'recording');
    await sleep(t0 + 1200 - Date.now());
    await w.stopRecorder(first); // the process goes away; its part ends about here
    assert.equal((await repo.get('brw_restart'))?.state, 'recording');

    w.pool.stop(t0 + 4000); // the browser stops while nobody records it
    await w.startRecorder();
    const file = await ready('brw_restart');
    assert.ok(Math.abs(durationS(file) - 4) < 0.06, `4 s (got ${durationS(file)})`);
    assert.deepEqual([0.3, 0.8, 2.5, 3.9].map((s) => shows(file, s)), ['red', 'blue', 'blue', 'blue']);
  } finally {
    await w.stop();
  }
});

test('when the replica holding a recording stops renewing its lease, then another takes it over and the video covers the browser’s life from what was stored', async () => {
  const w = await world('brw_takeover');
  try {
    const a = await w.startRecorder('lv-a', { leaseMs: 1000, partMs: 500 });
    const t0 = Date.now();
    w.pool.createdAtMs = t0;
    a.onStarted({ browserId: 'brw_takeover', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: t0 + 100 }, 'recording');
    w.pool.push({ jpeg: BLUE, timestampMs: t0 + 1200 }, 'recording'); // ends the first part (red) and is in the second
    await until(async () => (await repo.parts('brw_takeover')).some((p) => p.stored));

    // lv-a is paused, or its clock lags: by lv-b's clock its lease ran out long ago.
    await w.startRecorder('lv-b', { leaseMs: 1000, partMs: 500, now: () => Date.now() + 5000 });
    await until(async () => (await repo.get('brw_takeover'))?.instanceId === 'lv-b');
    await until(() => w.pool.openStreams.filter((s) => s.purpose === 'recording').length === 1 && w.pool.streams.filter((s) => s.purpose === 'recording').length === 2);
    const tb = Date.now();
    w.pool.push({ jpeg: BLUE, timestampMs: tb }, 'recording');
    await sleep(600);
    const stopMs = Date.now();
    w.pool.stop(stopMs);

    const file = await ready('brw_takeover');
    const lifeS = (stopMs - t0) / 1000;
    assert.ok(Math.abs(durationS(file) - lifeS) < 0.06, `${lifeS} s (got ${durationS(file)})`);
    assert.equal(shows(file, 0.5), 'red', 'what lv-a stored is in the video');
    assert.equal(shows(file, (tb - t0) / 1000 - 0.2), 'red', 'what lv-a never stored shows the last stored picture');
    assert.equal(shows(file, (tb - t0) / 1000 + 0.2), 'blue', 'then what lv-b recorded');
    assert.deepEqual(store.keys(PROJECT, 'recordings/parts/'), [], 'no part is left in object storage');
    assert.equal(fs.existsSync(path.join(dir, 'parts', 'lv-a', 'brw_takeover')), false, 'lv-a dropped what it was writing');
  } finally {
    await w.stop();
  }
});

test('when a browser stops before it showed anything, then its recording is a black picture for its whole life', async () => {
  const w = await world('brw_blank');
  try {
    const recorder = await w.startRecorder();
    const t0 = Date.now();
    w.pool.createdAtMs = t0 - 500;
    recorder.onStarted({ browserId: 'brw_blank', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    recorder.onStopped({ browserId: 'brw_blank', projectId: PROJECT, tsMs: t0 + 300 });
    const file = await ready('brw_blank');
    assert.ok(Math.abs(durationS(file) - 0.8) < 0.06, `0.8 s (got ${durationS(file)})`);
    assert.equal(brightness(file, 0.4), 0, 'black');
    assert.equal(await recorder.status(PROJECT, 'brw_blank', true).then((r) => r?.state), 'ready');
  } finally {
    await w.stop();
  }
});

test('when its recording.ready event cannot be prepared for longer than the attempts allowed (the pool away), then the recording waits in finalizing, is not failed, and turns ready with its event once it can', async () => {
  const w = await world('brw_announce');
  let refusals = 4;
  try {
    const recorder = await w.startRecorder('test', {
      maxAttempts: 2,
      announceReady: async (row, objectKey) => {
        if (refusals-- > 0) throw new Error('browser pool unavailable');
        return (trx) => recordOutboxEvent(trx, { projectId: row.projectId, type: 'recording.ready', orderingKey: row.browserId, data: { id: row.browserId, objectKey } });
      },
    });
    const t0 = Date.now();
    w.pool.createdAtMs = t0 - 500;
    recorder.onStarted({ browserId: 'brw_announce', projectId: PROJECT, tsMs: t0 });
    await w.streaming();
    recorder.onStopped({ browserId: 'brw_announce', projectId: PROJECT, tsMs: t0 + 300 });
    await ready('brw_announce');
    assert.equal(refusals, -1, 'four refusals, then the event');
    const rows = await db.knex('webhook_outbox').where({ ordering_key: 'brw_announce' }).select('type', 'data');
    assert.deepEqual(rows.map((r: { type: string; data: string }) => [r.type, JSON.parse(r.data)]), [['recording.ready', { id: 'brw_announce', objectKey: recordingKey('brw_announce') }]]);
  } finally {
    await w.stop();
  }
});

test('when no event tells of a browser, then the recorder finds it in the pool and its video starts at its creation', async () => {
  const w = await world('brw_unannounced');
  try {
    const t0 = Date.now();
    w.pool.createdAtMs = t0 - 3000; // created while live-view was down
    await w.startRecorder();
    await w.streaming();
    w.pool.push({ jpeg: RED, timestampMs: Date.now() }, 'recording');
    await sleep(300);
    w.pool.stop(t0 + 1000);
    const file = await ready('brw_unannounced');
    assert.ok(Math.abs(durationS(file) - 4) < 0.06, `4 s, creation to stop (got ${durationS(file)})`);
    assert.equal(shows(file, 0.5), 'red', 'the first picture stands for the time before it');
  } finally {
    await w.stop();
  }
});

test('when a browser came and went while nobody recorded, then the next recorder gives it a still picture for its whole life', async () => {
  const w = await world('brw_missed');
  try {
    const t0 = Date.now();
    w.pool.createdAtMs = t0 - 2500;
    w.pool.stop(t0 - 500);
    await w.startRecorder();
    const file = await ready('brw_missed');
    assert.ok(Math.abs(durationS(file) - 2) < 0.06, `2 s (got ${durationS(file)})`);
  } finally {
    await w.stop();
  }
});

test('when a lifecycle event is for a browser the pool does not know, then nothing is recorded', async () => {
  const w = await world('brw_ours');
  try {
    const recorder = await w.startRecorder();
    recorder.onStarted({ browserId: 'brw_someone_elses', projectId: PROJECT, tsMs: Date.now() });
    recorder.onStarted({ browserId: 'brw_ours', projectId: 'prj_other', tsMs: Date.now() });
    recorder.onStarted({ browserId: 'brw_ours', projectId: PROJECT, tsMs: Date.now() });
    await w.streaming();
    assert.equal(await repo.get('brw_someone_elses'), undefined);
    assert.equal((await repo.get('brw_ours'))?.projectId, PROJECT);
    assert.equal(w.pool.openStreams.length, 1);
  } finally {
    await w.stop();
  }
});
