/**
 * Every browser has a recording, through the real stack: under churn each of 15 short-lived
 * browsers (some stopped at once) has an MP4 whose length (ffprobe) is its wall time; a browser
 * created while live-view is down, and one that came and went during the outage, are recorded
 * once live-view is back, and the first gets its live view link.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { browsersOf, TOLERANCE_S, wallSeconds, type BrowserRecord } from './support/recordings.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

let f: StackFixture;
let videos: string;
let browsers: ReturnType<typeof browsersOf>;

before(async () => {
  videos = tempDir('recordings');
  f = await startStackFixture({ projects: ['alpha'], env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: '12' } });
  browsers = browsersOf(f, key, videos);
});
after(async () => {
  await f?.stop();
  fs.rmSync(videos, { recursive: true, force: true });
});

const key = () => f.projects.alpha!.key;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Short-lived browsers: each of the five lifetimes three times. */
const CHURN = 15;

test(`when ${CHURN} short-lived browsers come and go, some stopped at once, then each has a recording as long as it lived`, async (t) => {
  const began = Date.now();
  const lifetimesMs = Array.from({ length: CHURN }, (_, i) => [0, 100, 300, 700, 1500][i % 5]!);
  const stopped: BrowserRecord[] = [];
  const queue = [...lifetimesMs];
  // Five at a time: a churn the pool's limits allow, on a shared machine.
  await Promise.all(
    Array.from({ length: 5 }, async () => {
      for (let life = queue.shift(); life !== undefined; life = queue.shift()) {
        const b = await browsers.create();
        await sleep(life);
        stopped.push(await browsers.stop(b.id));
      }
    }),
  );
  assert.equal(stopped.length, CHURN);
  const churned = Date.now();
  const misses: string[] = [];
  for (const b of stopped) {
    const got = await browsers.recordedSeconds(b.id);
    if (Math.abs(got - wallSeconds(b)) > TOLERANCE_S) misses.push(`${b.id}: ${got} s of video for ${wallSeconds(b)} s`);
  }
  t.diagnostic(`churn ${((churned - began) / 1000).toFixed(1)} s, then every recording ready and checked in ${((Date.now() - churned) / 1000).toFixed(1)} s`);
  assert.deepEqual(misses, [], 'every video lasts its browser’s wall time');
});

test('when browsers are created while live-view is down, then once it is back each is recorded from its creation and the active one gets its live view link', async () => {
  await f.stack.kill('live-view');
  let live: BrowserRecord | undefined;
  try {
    live = await browsers.create();
    assert.equal(live.liveViewUrl, null, 'no live view while live-view is down');
    const gone = await browsers.create();
    await sleep(500);
    const goneStopped = await browsers.stop(gone.id);
    await sleep(1500);
    await f.stack.startService('live-view');

    // The link: minted when the browser is read once live-view is back.
    const url = await until(async () => (await browsers.get(live!.id)).liveViewUrl, { intervalMs: 200, what: 'the browser’s liveViewUrl' });
    const u = new URL(url);
    const ws = new WebSocket(`ws://${u.host}${u.pathname}/ws${u.search}`);
    const [frame] = (await once(ws, 'message')) as [Buffer];
    assert.deepEqual(JSON.parse(frame.toString()), { t: 'hello', mode: 'interactive' }, 'the link opens the live view');
    ws.close();
    const link = await f.api(`/api/v1/browsers/${live.id}/live-view-links`, { method: 'POST', key: key(), headers: { 'content-type': 'application/json' }, body: '{"mode":"view"}' });
    assert.equal(link.status, 201);

    const liveStopped = await browsers.stop(live.id);
    live = undefined;
    for (const b of [liveStopped, goneStopped]) {
      const got = await browsers.recordedSeconds(b.id);
      assert.ok(Math.abs(got - wallSeconds(b)) <= TOLERANCE_S, `${b.id}: ${got} s of video for ${wallSeconds(b)} s`);
    }
  } finally {
    if (!f.stack.children.has('live-view')) await f.stack.startService('live-view');
    if (live) await browsers.stop(live.id);
  }
});
