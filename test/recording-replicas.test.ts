/**
 * Two live-view replicas (one of every other service) on a fresh Postgres database, with short
 * leases and parts: every browser is recorded by one replica and its video lasts its life; a
 * viewer watches a browser through either replica; kill -9 of the replica holding recordings
 * mid-way: the other takes them over within the lease and finishes each, still as long as its
 * browser lived, including one that stopped while nobody held its lease.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import knexFactory, { type Knex } from 'knex';
import WebSocket from 'ws';
import { readFrameHeader } from '../services/live-view/src/viewer-protocol.js';
import { postgresUrl, tempDir } from './support/infra.js';
import { browsersOf, TOLERANCE_S, wallSeconds, type BrowserRecord } from './support/recordings.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const pg = await postgresUrl();
const LEASE_MS = 3000;
const RENEW_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

describe('recordings with two live-view replicas', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let admin: Knex;
  let db: Knex;
  let videos: string;
  let browsers: ReturnType<typeof browsersOf>;
  const database = `ats_recording_replicas_${Date.now().toString(36)}_${process.pid}`;

  before(async () => {
    videos = tempDir('replica-recordings');
    admin = knexFactory({ client: 'pg', connection: pg! });
    await admin.raw(`create database "${database}"`);
    const url = new URL(pg!);
    url.pathname = `/${database}`;
    db = knexFactory({ client: 'pg', connection: url.toString(), pool: { min: 0, max: 1 } });
    f = await startStackFixture({
      databaseUrl: url.toString(),
      replicas: { 'live-view': 2 },
      projects: ['alpha'],
      env: { RECORDING_LEASE_MS: String(LEASE_MS), RECORDING_RENEW_MS: String(RENEW_MS), RECORDING_PART_MS: '1000', MAX_ACTIVE_BROWSERS_PER_PROJECT: '12' },
    });
    browsers = browsersOf(f, () => f.projects.alpha!.key, videos);
  });
  after(async () => {
    await f?.stop();
    await db?.destroy();
    await admin?.raw(`drop database if exists "${database}" with (force)`);
    await admin?.destroy();
    fs.rmSync(videos, { recursive: true, force: true });
  });

  /** The recording rows of these browsers, by browser id. */
  async function rows(ids: string[]): Promise<Map<string, { instance_id: string; state: string }>> {
    const found = await db('live_view.recordings').whereIn('browser_id', ids).select('browser_id', 'instance_id', 'state');
    return new Map(found.map((r: { browser_id: string; instance_id: string; state: string }) => [r.browser_id, r]));
  }

  /** How many recorders began this browser's video, over both replicas' logs. */
  const recordersOf = (id: string) => f.logs('live-view').split('\n').filter((l) => l.includes(id) && /"msg":"(recording started|browser stopped before it was recorded[^"]*)"/.test(l)).length;

  /** Whether a replica's live view edge shows the browser: the page's socket says hello, then a picture comes. */
  async function watch(port: number, liveViewUrl: string, timeoutMs = 20000): Promise<ReturnType<typeof readFrameHeader>> {
    const u = new URL(liveViewUrl);
    const ws = new WebSocket(`ws://127.0.0.1:${port}${u.pathname}/ws${u.search}`);
    let timer: NodeJS.Timeout | undefined;
    try {
      // One listener from the start: the hello and the first picture can come in one read, and a
      // listener added after awaiting the hello would miss a picture emitted in the same tick (a
      // still page sends no other; a run waited 324 s for one).
      return await new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no picture through the replica on ${port} within ${timeoutMs} ms`)), timeoutMs);
        let hello = false;
        ws.once('error', reject);
        ws.on('message', (d: Buffer, binary: boolean) => {
          if (!hello) {
            hello = true;
            try {
              assert.deepEqual(JSON.parse(d.toString()), { t: 'hello', mode: 'interactive' });
            } catch (err) {
              reject(err);
            }
          } else if (binary) {
            resolve(readFrameHeader(d));
          }
        });
      });
    } finally {
      clearTimeout(timer);
      ws.close();
    }
  }

  test('when browsers come and go, then each is recorded by one replica and its video lasts as long as it lived', async () => {
    const lifetimesMs = [300, 800, 1500, 300, 800, 1500];
    const stopped: BrowserRecord[] = [];
    await Promise.all(
      [0, 1, 2].map(async (lane) => {
        for (const life of lifetimesMs.filter((_, i) => i % 3 === lane)) {
          const b = await browsers.create();
          await sleep(life);
          stopped.push(await browsers.stop(b.id));
        }
      }),
    );
    const misses: string[] = [];
    for (const b of stopped) {
      const got = await browsers.recordedSeconds(b.id);
      if (Math.abs(got - wallSeconds(b)) > TOLERANCE_S) misses.push(`${b.id}: ${got} s of video for ${wallSeconds(b)} s`);
    }
    assert.deepEqual(misses, [], 'every video lasts its browser’s wall time');
    assert.deepEqual(stopped.map((b) => recordersOf(b.id)), stopped.map(() => 1), 'one recorder per browser');
    const found = await rows(stopped.map((b) => b.id));
    assert.deepEqual(stopped.map((b) => found.get(b.id)?.state), stopped.map(() => 'ready'));
    assert.equal((await db('live_view.recording_parts').whereIn('browser_id', stopped.map((b) => b.id)).count({ n: '*' }))[0]!.n, '0', 'no part is left behind');
  });

  test('when a viewer opens a browser’s live view through either replica, then it sees the browser', async () => {
    const b = await browsers.create();
    try {
      const ports = [f.stack.edgePorts.get('liveView')!, f.stack.replicas.find((r) => r.service === 'live-view')!.edgePorts.get('liveView')!];
      for (const port of ports) {
        const frame = await watch(port, b.liveViewUrl!);
        assert.equal(frame.jpeg.subarray(0, 2).toString('hex'), 'ffd8', `a JPEG picture through the replica on ${port}`);
        assert.ok(frame.width > 0 && frame.height > 0);
      }
    } finally {
      await browsers.stop(b.id);
    }
  });

  test('when the replica holding recordings is killed mid-way, then the other takes them over within the lease and each video still lasts its browser’s life', async (t) => {
    const live = await Promise.all([1, 2, 3, 4].map(() => browsers.create()));
    const ids = live.map((b) => b.id);
    // Mid-way: each recording has a part in object storage.
    await until(async () => (await db('live_view.recording_parts').whereIn('browser_id', ids).whereNotNull('stored_at').countDistinct({ n: 'browser_id' }))[0]!.n === String(ids.length), {
      timeoutMs: 30000,
      what: 'a stored part of every recording',
    });
    const holders = await rows(ids);
    const count = (id: string) => ids.filter((b) => holders.get(b)?.instance_id === id).length;
    const victim = count('live-view-1') >= count('live-view-2') ? 'live-view-1' : 'live-view-2';
    const survivor = victim === 'live-view-1' ? 'live-view-2' : 'live-view-1';
    const orphans = ids.filter((id) => holders.get(id)?.instance_id === victim);
    assert.ok(orphans.length > 0);

    const killedAt = Date.now();
    await f.stack.kill('live-view', victim === 'live-view-1' ? 1 : 2);
    // One stops while nobody holds its recording.
    const stopped = [await browsers.stop(orphans[0]!)];
    await until(async () => [...(await rows(orphans)).values()].every((r) => r.instance_id === survivor), { timeoutMs: 30000, intervalMs: 100, what: 'the survivor holding every orphaned recording' });
    const tookMs = Date.now() - killedAt;
    t.diagnostic(`${orphans.length} of ${ids.length} recordings taken over ${tookMs} ms after the kill`);
    assert.ok(tookMs <= LEASE_MS + 2 * RENEW_MS + 1000, `taken over ${tookMs} ms after the kill (lease ${LEASE_MS} ms)`);

    await sleep(1000); // recorded by the survivor for a while
    for (const id of ids) if (id !== orphans[0]) stopped.push(await browsers.stop(id));
    const misses: string[] = [];
    for (const b of stopped) {
      const got = await browsers.recordedSeconds(b.id, 30000);
      if (Math.abs(got - wallSeconds(b)) > TOLERANCE_S) misses.push(`${b.id}${orphans.includes(b.id) ? ' (taken over)' : ''}: ${got} s of video for ${wallSeconds(b)} s`);
    }
    assert.deepEqual(misses, [], 'every video lasts its browser’s wall time');
    const unfinished = [...(await db('live_view.recordings').whereIn('state', ['recording', 'finalizing']).select('browser_id'))];
    assert.deepEqual(unfinished, [], 'nothing left recording or finalizing');
  });
});
