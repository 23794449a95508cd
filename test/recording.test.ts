/**
 * Recordings through the real stack: every browser is recorded from start to stop into an MP4
 * that ffprobe reads as H.264 lasting the browser's wall time, whether its page moves all the
 * time or once a second; a crash of live-view keeps finished recordings and resumes the running
 * one; a run's browser is watchable while it works and recorded. Videos go to
 * .test-artifacts/recording/.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser as Puppeteer, type Page } from 'puppeteer-core';
import { serveSite, type TestSite } from './support/site.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const ARTIFACTS = path.resolve('.test-artifacts/recording');

let f: StackFixture;
let site: TestSite;

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  [f, site] = await Promise.all([startStackFixture({ projects: ['alpha', 'beta'] }), serveSite()]);
});
after(async () => {
  await f?.stop();
  await site?.close();
});

const alpha = () => f.projects.alpha!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

interface Kept {
  id: string;
  page: Page;
  cdp: Puppeteer;
  /** When the pool created it (ms): time 0 of its video. */
  createdAt: number;
}

async function browserOn(pageName: string): Promise<Kept> {
  const res = await f.api('/api/v1/browsers', { method: 'POST', key: alpha().key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ screen_width: 1280, screen_height: 800 }) });
  assert.equal(res.status, 201, await res.clone().text());
  const b = (await res.json()) as { id: string; cdpUrl: string; createdAt: string };
  const createdAt = Date.parse(b.createdAt); // the video starts here
  const cdp = await puppeteer.connect({ browserWSEndpoint: b.cdpUrl, defaultViewport: null });
  const [page] = await cdp.pages();
  await page!.goto(site.url(pageName));
  return { id: b.id, page: page!, cdp, createdAt };
}

/** Stops the browser; returns how long it lived by the pool's own record, in seconds. */
async function stop(b: Kept): Promise<number> {
  await b.cdp.disconnect();
  const res = await f.api(`/api/v1/browsers/${b.id}/stop`, { method: 'POST', key: alpha().key });
  assert.equal(res.status, 200);
  const { createdAt, stoppedAt } = (await res.json()) as { createdAt: string; stoppedAt: string };
  return (Date.parse(stoppedAt) - Date.parse(createdAt)) / 1000;
}

const recording = (id: string, key = alpha().key) => f.api(`/api/v1/browsers/${id}/recording`, { key });

/** Polls GET /recording through 409 (finalising) until it answers; the MP4 is made after the stop. */
async function readyRecording(id: string): Promise<{ url: string; expiresAt: string }> {
  return until(
    async () => {
      const res = await recording(id);
      if (res.status === 200) return (await res.json()) as { url: string; expiresAt: string };
      assert.equal(res.status, 409, `while finalising the answer is 409 (got ${res.status}: ${await res.text()})`);
      return undefined;
    },
    { timeoutMs: 60000, intervalMs: 250, what: `the recording of ${id}` },
  );
}

/** Waits until the clock page has changed `n` times; returns when each change was, in seconds of the video. */
async function clockFlips(b: Kept, n: number): Promise<number[]> {
  await b.page.evaluate(() => {
    const w = window as unknown as { flips: number[] };
    w.flips = [];
    new MutationObserver(() => w.flips.push(Date.now())).observe(document.getElementById('n')!, { childList: true });
  });
  const flips = await b.page.waitForFunction((n: number) => {
    const { flips } = window as unknown as { flips: number[] };
    return flips.length >= n && flips;
  }, { polling: 100, timeout: 30000 }, n);
  return ((await flips.jsonValue()) as number[]).map((t) => (t - b.createdAt) / 1000);
}

interface Probed {
  file: string;
  codec: string;
  pixFmt: string;
  durationS: number;
  /** The index (moov) comes before the media (mdat): it plays while downloading. */
  faststart: boolean;
}

async function download(url: string, name: string): Promise<Probed> {
  const res = await fetch(url);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'video/mp4');
  const bytes = Buffer.from(await res.arrayBuffer());
  const file = path.join(ARTIFACTS, `${name}.mp4`);
  fs.writeFileSync(file, bytes);
  const out = spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,pix_fmt:format=duration', '-of', 'json', file], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  const j = JSON.parse(out.stdout) as { streams: { codec_name: string; pix_fmt: string }[]; format: { duration: string } };
  return { file, codec: j.streams[0]!.codec_name, pixFmt: j.streams[0]!.pix_fmt, durationS: Number(j.format.duration), faststart: bytes.indexOf('moov') < bytes.indexOf('mdat') };
}

/**
 * A filter picking what is on screen at `atS`. The video has a frame only where the picture
 * changed, so a seek would skip to the next change: resample to a steady rate first.
 */
function at(atS: number, then: string): string {
  return `fps=100,trim=start=${atS},${then}`;
}

/** Mean brightness (0–255) of the video's frame at `atS` seconds. */
function brightness(file: string, atS: number): number {
  const out = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-frames:v', '1', '-vf', at(atS, 'scale=1:1:flags=area'), '-f', 'rawvideo', '-pix_fmt', 'gray', 'pipe:1']);
  assert.equal(out.status, 0, String(out.stderr));
  return out.stdout[0]!;
}

/** Whether the frames at two moments are the same picture. */
function sameFrame(file: string, aS: number, bS: number): boolean {
  const frame = (s: number) => spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-frames:v', '1', '-vf', at(s, 'scale=64:40'), '-f', 'rawvideo', '-pix_fmt', 'gray', 'pipe:1']).stdout;
  const [x, y] = [frame(aS), frame(bS)];
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff += Math.abs(x[i]! - y[i]!);
  return diff / x.length < 2;
}

/**
 * Whether the video's last 2 s are not one frozen picture: some moment differs from the one
 * 0.4 s before it (a compositor starved of CPU may send nothing for a second).
 */
function movesAtEnd(v: Probed): boolean {
  const moments = [1.9, 1.5, 1.1, 0.7, 0.3].map((s) => v.durationS - s);
  return moments.slice(1).some((t, i) => !sameFrame(v.file, moments[i]!, t));
}

describe('a recording lasts as long as its browser', () => {
  for (const [kind, pageName] of [
    ['animated', 'live-animated.html'],
    ['once a second', 'live-clock.html'],
  ] as const) {
    test(`when a browser is kept on a page that changes ${kind === 'animated' ? 'all the time' : 'once a second'} and stopped, then its recording is an H.264 MP4 as long as the browser lived`, async () => {
      const b = await browserOn(pageName);
      // The browser lives until its page has changed enough to be seen in the video, no longer.
      let flips: number[] = [];
      if (kind === 'once a second') flips = await clockFlips(b, 4);
      else await b.page.waitForFunction(() => Number(document.getElementById('t')!.textContent) >= 2, { polling: 100, timeout: 30000 });
      assert.equal((await recording(b.id)).status, 409, 'still recording: not yet');
      const lived = await stop(b);

      const { url, expiresAt } = await readyRecording(b.id);
      const lifetime = Date.parse(expiresAt) - Date.now();
      assert.ok(lifetime > 3540_000 && lifetime <= 3600_000, `the link lives an hour (got ${lifetime} ms)`);
      const v = await download(url, kind === 'animated' ? 'animated' : 'sparse');
      assert.equal(v.codec, 'h264');
      assert.equal(v.pixFmt, 'yuv420p');
      assert.ok(v.faststart, 'moov before mdat');
      assert.ok(Math.abs(v.durationS - lived) <= 0.5, `${lived} s ± 0.5 s (got ${v.durationS} s)`);
      if (kind === 'once a second') {
        // The page flips between dark and light every second; the video shows it at the right times:
        // halfway between two flips, each picture differs from the one before.
        const seen = flips.slice(0, 3).map((t) => brightness(v.file, t + 0.5));
        assert.ok(Math.abs(seen[0]! - seen[1]!) > 60 && Math.abs(seen[1]! - seen[2]!) > 60, `alternating frames at ${flips.map((t) => t + 0.5)} s (got ${seen})`);
      } else {
        assert.ok(movesAtEnd(v), 'the animation moves in the video (its last 2 s)');
      }
    });
  }
});

describe('GET /browsers/{id}/recording', () => {
  test('when a browser has no recording or belongs to another project, then 404; while it runs, 409', async () => {
    assert.equal((await recording('brw_doesnotexist00000000000000')).status, 404);
    const b = await browserOn('live-clock.html');
    try {
      const running = await recording(b.id);
      assert.equal(running.status, 409);
      assert.equal(running.headers.get('retry-after'), '2');
      assert.equal((await recording(b.id, f.projects.beta!.key)).status, 404);
    } finally {
      await stop(b);
    }
    await readyRecording(b.id);
    assert.equal((await recording(b.id, f.projects.beta!.key)).status, 404, 'a ready recording of another project is still 404');
  });
});

describe('a crash of live-view', () => {
  test('when live-view is killed mid-recording and restarted, then finished recordings stay and the running one resumes', async () => {
    const done = await browserOn('live-clock.html');
    await sleep(2000); // its life: the scenario, not a wait
    await stop(done);
    const before = await download((await readyRecording(done.id)).url, 'before-crash');

    const b = await browserOn('live-animated.html');
    await sleep(3000 - (Date.now() - b.createdAt));
    await f.stack.kill('live-view');
    const killedS = (Date.now() - b.createdAt) / 1000;
    await sleep(2000);
    const restartS = (Date.now() - b.createdAt) / 1000;
    await f.stack.startService('live-view');
    // The restarted recorder says when it has taken the recording up again; from then on the animation is recorded for a while (the scenario).
    await until(() => f.logs('live-view').split('\n').some((l) => l.includes('"recording resumed"') && l.includes(b.id)), { timeoutMs: 30000, what: 'the recording resumed' });
    await sleep(3000);
    const lived = await stop(b);

    const after = await download((await readyRecording(done.id)).url, 'after-crash-finished');
    assert.equal(fs.readFileSync(after.file).equals(fs.readFileSync(before.file)), true, 'the finished recording is unchanged');

    const v = await download((await readyRecording(b.id)).url, 'crashed-and-resumed');
    assert.equal(v.codec, 'h264');
    assert.ok(Math.abs(v.durationS - lived) <= 0.5, `the video still lasts the browser's ${lived} s (got ${v.durationS} s)`);
    // While nobody recorded, the last recorded picture stands; after the restart the animation moves again.
    assert.ok(sameFrame(v.file, killedS + 0.3, restartS - 0.1), 'the gap shows the last frame before the crash');
    assert.ok(movesAtEnd(v), 'recording resumed after the restart');
  });
});

describe("a run's browser", () => {
  test('when a browser-agent run works in a browser, then browser.ready carries its live view URL and the browser is recorded', async () => {
    const created = await f.api('/api/v1/agents/browser-agent/runs', {
      method: 'POST',
      key: alpha().key,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ task: `Open ${site.url('live-clock.html')}. Wait for 2 seconds. Extract the title.`, model: 'builtin' }),
    });
    assert.equal(created.status, 202, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    const run = await until(
      async () => {
        const r = (await (await f.api(`/api/v1/agents/browser-agent/runs/${id}`, { key: alpha().key })).json()) as { status: string; browserId: string | null };
        return ['completed', 'failed', 'stopped'].includes(r.status) && r;
      },
      { timeoutMs: 60000, intervalMs: 250, what: 'the run’s end' },
    );
    assert.equal(run.status, 'completed');

    const events = (await (await f.api(`/api/v1/agents/browser-agent/runs/${id}/events`, { key: alpha().key })).json()) as { events: { type: string; data: Record<string, string> }[] };
    const ready = events.events.find((e) => e.type === 'browser.ready');
    assert.ok(ready, 'a browser.ready event');
    assert.equal(ready.data.browserId, run.browserId);
    assert.ok(ready.data.liveViewUrl!.startsWith(`${f.stack.edgeUrl('liveView')}/browsers/${run.browserId}?token=`), ready.data.liveViewUrl);
    const page = await fetch(ready.data.liveViewUrl!);
    assert.equal(page.status, 200, 'the live view link works');

    // The run is done with its browser; once the browser stops, its recording is there.
    await f.api(`/api/v1/browsers/${run.browserId}/stop`, { method: 'POST', key: alpha().key });
    const v = await download((await readyRecording(run.browserId!)).url, 'run-browser');
    assert.equal(v.codec, 'h264');
    assert.ok(v.durationS >= 2, `covers the run (got ${v.durationS} s)`);
  });
});
