/**
 * Live view and recording: frame latency (the frame's CDP timestamp → a WebSocket viewer) and fps
 * on an animated page with 1 and 5 viewers; the CPU of recording one browser (live-view's process
 * group: Node plus its ffmpeg) as a fraction of a core; the encoder's cost per preset and frame
 * rate on real screencast frames (how the defaults were chosen); and how many recorded browsers
 * the machine holds before a viewer's fps drops under 15.
 *
 * Run alone: `npx tsx bench/live-view.bench.ts` (BENCH_MODE=tsx to skip the build).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';
import { mkvFrameHead, mkvHeader } from '../services/live-view/src/mjpeg-mkv.js';
import { encoderArgs } from '../services/live-view/src/part-encoder.js';
import { createPoolClient, type FrameSource } from '../services/live-view/src/pool-client.js';
import { Timeline } from '../services/live-view/src/recording-timeline.js';
import { readFrameHeader } from '../services/live-view/src/viewer-protocol.js';
import { serveSite, type TestSite } from '../test/support/site.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';

export interface ViewerFigures {
  viewers: number;
  /** Frames per second each viewer got: mean and the slowest viewer. */
  fpsMean: number;
  fpsMin: number;
  /** From the frame's CDP timestamp (compositor) to its arrival at the viewer. */
  latencyP50Ms: number;
  latencyP95Ms: number;
  /** The same in the same window, read straight from the pool's StreamFrames (what live-view gets). */
  poolFps: number;
  poolLatencyP50Ms: number;
}

export interface EncoderFigures {
  preset: string;
  fps: number;
  /** ffmpeg CPU per second of video, in cores. */
  cores: number;
  kbps: number;
}

/** Chromium's own CPU for an animated page: without a screencast, screencasting every frame (what any subscriber costs today), and paced to 10 fps by delaying the acks. */
export interface ScreencastFigures {
  noneCores: number;
  fullCores: number;
  fullFps: number;
  pacedCores: number;
  pacedFps: number;
}

export interface LiveViewFigures {
  loadAverageAtStart: number[];
  viewers: ViewerFigures[];
  /** live-view's process group (Node + ffmpeg) recording one animated browser with nobody watching, minus its idle use. */
  recordingOneBrowserCores: number;
  /** The ffmpeg part of it. */
  recordingFfmpegCores: number;
  idleLiveViewCores: number;
  encoder: EncoderFigures[];
  screencast: ScreencastFigures;
  /** A viewer's fps on browser 1 while n browsers (all recorded, all animated) run. */
  capacity: { browsers: number; fps: number }[];
  /** Most recorded browsers with the viewer still at ≥ 15 fps (0 if even one is below). */
  maxRecordedBrowsersAt15Fps: number;
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds used so far by a process group (with reaped children), in all and by its ffmpeg processes. */
function groupCpuSeconds(pgid: number): { all: number; ffmpeg: number } {
  let all = 0;
  let ffmpeg = 0;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // After the command: state(0) ppid(1) pgrp(2) … utime(11) stime(12) cutime(13) cstime(14)
      if (Number(f[2]) !== pgid) continue;
      const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
      all += ticks;
      if (stat.includes('(ffmpeg)')) ffmpeg += ticks;
    } catch {
      /* exited meanwhile */
    }
  }
  return { all: all / CLK_TCK, ffmpeg: ffmpeg / CLK_TCK };
}

async function cpuCores(pgid: number, ms: number): Promise<{ all: number; ffmpeg: number }> {
  const c0 = groupCpuSeconds(pgid);
  const t0 = Date.now();
  await sleep(ms);
  const c1 = groupCpuSeconds(pgid);
  const secs = (Date.now() - t0) / 1000;
  return { all: (c1.all - c0.all) / secs, ffmpeg: (c1.ffmpeg - c0.ffmpeg) / secs };
}

interface Bench {
  f: StackFixture;
  site: TestSite;
  key: string;
  projectId: string;
  pool: FrameSource;
}

async function animatedBrowser(b: Bench): Promise<{ id: string; liveViewUrl: string }> {
  const res = await b.f.api('/api/v1/browsers', { method: 'POST', key: b.key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ screen_width: 1280, screen_height: 800 }) });
  if (res.status !== 201) throw new Error(`create browser: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { id: string; liveViewUrl: string; cdpUrl: string };
  const cdp = await puppeteer.connect({ browserWSEndpoint: body.cdpUrl, defaultViewport: null });
  const [page] = await cdp.pages();
  await page!.goto(b.site.url('live-animated.html'));
  await cdp.disconnect();
  return { id: body.id, liveViewUrl: body.liveViewUrl };
}

/** A viewer speaking the page's protocol; acks each frame on arrival (an instant screen). */
function viewer(liveViewUrl: string) {
  const u = new URL(liveViewUrl);
  const ws = new WebSocket(`ws://${u.host.replace('localhost', '127.0.0.1')}${u.pathname}/ws${u.search}`);
  const latencies: number[] = [];
  let frames = 0;
  let counting = false;
  ws.on('message', (data: Buffer, binary) => {
    if (!binary) return;
    ws.send('{"t":"ack"}');
    if (!counting) return;
    frames++;
    latencies.push(Date.now() - readFrameHeader(data).timestampMs);
  });
  return {
    opened: new Promise((r) => ws.once('open', r)),
    start() {
      counting = true;
      frames = 0;
      latencies.length = 0;
    },
    stop: () => ({ frames, latencies: [...latencies] }),
    close: () => ws.close(),
  };
}

interface Watched {
  id: string;
  liveViewUrl: string;
}

async function watch(b: Bench, browser: Watched, n: number, ms: number): Promise<ViewerFigures> {
  const vs = Array.from({ length: n }, () => viewer(browser.liveViewUrl));
  await Promise.all(vs.map((v) => v.opened));
  await sleep(1500);
  // The pool's own stream alongside, to tell live-view's share of latency and fps from Chromium's.
  const direct: number[] = [];
  const stream = b.pool.streamFrames(b.projectId, browser.id, 'viewers');
  stream.on('data', (m: { jpeg: Buffer; timestampMs: number }) => m.jpeg.length && direct.push(Date.now() - m.timestampMs));
  stream.on('error', () => {});
  vs.forEach((v) => v.start());
  await sleep(300);
  direct.length = 0;
  const t0 = Date.now();
  await sleep(ms);
  const secs = (Date.now() - t0) / 1000;
  const results = vs.map((v) => v.stop());
  const poolFrames = [...direct];
  stream.cancel();
  vs.forEach((v) => v.close());
  const fps = results.map((r) => r.frames / secs);
  const lat = results.flatMap((r) => r.latencies);
  return {
    viewers: n,
    fpsMean: fps.reduce((a, x) => a + x, 0) / n,
    fpsMin: Math.min(...fps),
    latencyP50Ms: percentile(lat, 50),
    latencyP95Ms: percentile(lat, 95),
    poolFps: poolFrames.length / secs,
    poolLatencyP50Ms: percentile(poolFrames, 50),
  };
}

/** Real screencast JPEGs with their timestamps, as a viewer receives them. */
async function captureFrames(liveViewUrl: string, ms: number): Promise<{ jpeg: Buffer; ts: number }[]> {
  const u = new URL(liveViewUrl);
  const ws = new WebSocket(`ws://${u.host.replace('localhost', '127.0.0.1')}${u.pathname}/ws${u.search}`);
  const frames: { jpeg: Buffer; ts: number }[] = [];
  ws.on('message', (data: Buffer, binary) => {
    if (!binary) return;
    ws.send('{"t":"ack"}');
    const h = readFrameHeader(data);
    frames.push({ jpeg: Buffer.from(h.jpeg), ts: h.timestampMs });
  });
  await sleep(ms);
  ws.close();
  return frames;
}

/** Encodes captured frames the way the recorder does and measures ffmpeg's CPU (bash `times`). */
async function encoderCost(frames: { jpeg: Buffer; ts: number }[], preset: string, fps: number, dir: string): Promise<EncoderFigures> {
  const file = path.join(dir, `enc-${preset}-${fps}.ts`);
  const args = encoderArgs({ fps, crf: 30, preset, width: 1280, height: 800, file });
  const child = spawn('bash', ['-c', 'ffmpeg "$@" && times', 'bash', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  const timeline = new Timeline(frames[0]!.ts, fps);
  child.stdin.write(mkvHeader({ width: 1280, height: 800, fps }));
  const write = (jpeg: Buffer, tick: number) => {
    child.stdin.write(mkvFrameHead((tick * 1000) / fps, jpeg.length));
    child.stdin.write(jpeg);
  };
  for (const fr of frames) timeline.frame(fr.jpeg, fr.ts, write);
  timeline.finish(frames.at(-1)!.ts, write);
  child.stdin.end();
  await new Promise((r) => child.once('close', r));
  // `times`: shell user/sys, then children user/sys, as 0m1.234s.
  const [, children] = out.trim().split('\n').slice(-2);
  const secs = (children ?? '').split(' ').map((t) => {
    const m = /(\d+)m([\d.]+)s/.exec(t);
    return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
  });
  const videoSeconds = (timeline.endMs - timeline.startMs) / 1000;
  const size = fs.statSync(file).size;
  fs.rmSync(file);
  return { preset, fps, cores: (secs[0]! + secs[1]!) / videoSeconds, kbps: (size * 8) / 1000 / videoSeconds };
}

async function screencastCost(site: TestSite, ms: number): Promise<ScreencastFigures> {
  const browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--window-size=1280,800'],
    defaultViewport: { width: 1280, height: 800 },
  });
  try {
    const pgid = browser.process()!.pid!;
    const page = await browser.newPage();
    await page.goto(site.url('live-animated.html'));
    const cdp = await page.createCDPSession();
    await sleep(1000);
    const none = (await cpuCores(pgid, ms)).all;
    let frames = 0;
    let minGapMs = 0;
    let last = 0;
    cdp.on('Page.screencastFrame', (f: { sessionId: number }) => {
      frames++;
      // Chromium sends the next frame only after the ack: delaying it paces the screencast.
      const wait = Math.max(0, last + minGapMs - Date.now());
      setTimeout(() => {
        last = Date.now();
        cdp.send('Page.screencastFrameAck', { sessionId: f.sessionId }).catch(() => {});
      }, wait);
    });
    await cdp.send('Page.startScreencast', { format: 'jpeg', quality: 60, everyNthFrame: 1 });
    await sleep(1000);
    frames = 0;
    const full = (await cpuCores(pgid, ms)).all;
    const fullFps = frames / (ms / 1000);
    minGapMs = 100;
    await sleep(1000);
    frames = 0;
    const paced = (await cpuCores(pgid, ms)).all;
    const pacedFps = frames / (ms / 1000);
    return { noneCores: none, fullCores: full, fullFps, pacedCores: paced, pacedFps };
  } finally {
    await browser.close();
  }
}

export async function liveViewBench(opts: { measureMs?: number; maxBrowsers?: number; mode?: 'dist' | 'tsx' } = {}): Promise<LiveViewFigures> {
  const measureMs = opts.measureMs ?? 8000;
  const maxBrowsers = opts.maxBrowsers ?? 12;
  const loadAverageAtStart = os.loadavg();
  const site = await serveSite();
  const f = await startStackFixture({
    mode: opts.mode ?? 'dist',
    projects: ['bench'],
    env: { LOG_LEVEL: 'warn', MAX_ACTIVE_BROWSERS_PER_PROJECT: String(maxBrowsers + 4), BROWSER_IDLE_TIMEOUT_SECONDS: '0' },
  });
  const b: Bench = { f, site, key: f.projects.bench!.key, projectId: f.projects.bench!.projectId, pool: createPoolClient(`127.0.0.1:${f.stack.ports.get('browser-pool')}`, 5000, f.stack.internalToken) };
  const liveViewPgid = f.stack.children.get('live-view')!.pid!;
  const stops: string[] = [];
  try {
    const idleLiveViewCores = (await cpuCores(liveViewPgid, 4000)).all;

    const first = await animatedBrowser(b);
    stops.push(first.id);
    // Recording alone (nobody watching): live-view's Node and ffmpeg.
    await sleep(2000);
    const recordingCpu = await cpuCores(liveViewPgid, measureMs);
    const recordingOneBrowserCores = recordingCpu.all - idleLiveViewCores;

    const viewers = [await watch(b, first, 1, measureMs), await watch(b, first, 5, measureMs)];

    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-bench-encoder-'));
    const frames = await captureFrames(first.liveViewUrl, 10000);
    const encoder: EncoderFigures[] = [];
    for (const [preset, fps] of [['ultrafast', 10], ['superfast', 10], ['veryfast', 10], ['superfast', 15], ['superfast', 5]] as const) {
      encoder.push(await encoderCost(frames, preset, fps, work));
    }
    fs.rmSync(work, { recursive: true, force: true });
    const screencast = await screencastCost(site, measureMs);

    const capacity: { browsers: number; fps: number }[] = [{ browsers: 1, fps: viewers[0]!.fpsMean }];
    let maxRecordedBrowsersAt15Fps = viewers[0]!.fpsMean >= 15 ? 1 : 0;
    for (let n = 2; n <= maxBrowsers && maxRecordedBrowsersAt15Fps === n - 1; n++) {
      stops.push((await animatedBrowser(b)).id);
      const fps = (await watch(b, first, 1, Math.min(measureMs, 5000))).fpsMean;
      capacity.push({ browsers: n, fps });
      if (fps >= 15) maxRecordedBrowsersAt15Fps = n;
    }
    return { loadAverageAtStart, viewers, recordingOneBrowserCores, recordingFfmpegCores: recordingCpu.ffmpeg, idleLiveViewCores, encoder, screencast, capacity, maxRecordedBrowsersAt15Fps };
  } finally {
    await Promise.all(stops.map((id) => f.api(`/api/v1/browsers/${id}/stop`, { method: 'POST', key: b.key }).catch(() => undefined)));
    b.pool.close();
    await f.stop();
    await site.close();
  }
}

/** CPU of ten idle browsers with and without recording, in the same run. */
export interface IdleRecordingFigures {
  browsers: number;
  measureMs: number;
  /** Cores used by the browser pool (with its Chromiums) and live-view (with its ffmpegs) while the idle browsers are open, recording off. */
  unrecordedCores: number;
  /** The same with recording on. */
  recordedCores: number;
  /** Of the recorded run, ffmpeg's share. */
  recordedFfmpegCores: number;
  /** ffmpeg encoders running during the recorded measurement (one per browser shows they were all recorded). */
  encoders: number;
  /** (recorded − unrecorded) / browsers: what recording one idle browser costs, in cores. */
  perBrowserCores: number;
}

/** CPU seconds so far of the processes under `roots` (every descendant, with reaped children), in all and by ffmpeg. */
function treeCpuSeconds(roots: number[]): { all: number; ffmpeg: number; ffmpegs: number } {
  const procs = new Map<number, { ppid: number; ticks: number; ffmpeg: boolean }>();
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(pid), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]), ffmpeg: stat.includes('(ffmpeg)') });
    } catch {
      /* exited meanwhile */
    }
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; p = procs.get(p)?.ppid ?? 0, hops++) if (roots.includes(p)) return true;
    return false;
  };
  let all = 0;
  let ffmpeg = 0;
  let ffmpegs = 0;
  for (const [pid, p] of procs) {
    if (!inTree(pid)) continue;
    all += p.ticks;
    if (p.ffmpeg) (ffmpeg += p.ticks), ffmpegs++;
  }
  return { all: all / CLK_TCK, ffmpeg: ffmpeg / CLK_TCK, ffmpegs };
}

/**
 * Ten browsers left on a still page, first with recording off, then (live-view restarted) with
 * it on, each measured over `measureMs`: the pool with its Chromiums plus live-view with its
 * ffmpegs, so the difference is all that recording costs.
 */
export async function idleRecordingBench(opts: { browsers?: number; measureMs?: number; mode?: 'dist' | 'tsx' } = {}): Promise<IdleRecordingFigures> {
  const n = opts.browsers ?? 10;
  const measureMs = opts.measureMs ?? 15000;
  const site = await serveSite();
  const f = await startStackFixture({
    mode: opts.mode ?? 'dist',
    projects: ['bench'],
    env: { LOG_LEVEL: 'warn', MAX_ACTIVE_BROWSERS_PER_PROJECT: String(n + 2), BROWSER_IDLE_TIMEOUT_SECONDS: '0', RECORDING_ENABLED: 'false' },
  });
  const key = f.projects.bench!.key;
  const roots = () => [f.stack.children.get('browser-pool')!.pid!, f.stack.children.get('live-view')!.pid!];
  const phase = async (): Promise<{ all: number; ffmpeg: number; ffmpegs: number }> => {
    const ids: string[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ screen_width: 1280, screen_height: 800 }) });
        if (res.status !== 201) throw new Error(`create browser: ${res.status} ${await res.text()}`);
        const body = (await res.json()) as { id: string; cdpUrl: string };
        ids.push(body.id);
        const cdp = await puppeteer.connect({ browserWSEndpoint: body.cdpUrl, defaultViewport: null });
        const [page] = await cdp.pages();
        await page!.goto(site.url('run-article.html'));
        await cdp.disconnect();
      }
      await sleep(5000); // the last launches and first frames settle
      const c0 = treeCpuSeconds(roots());
      const t0 = Date.now();
      await sleep(measureMs);
      const c1 = treeCpuSeconds(roots());
      const secs = (Date.now() - t0) / 1000;
      return { all: (c1.all - c0.all) / secs, ffmpeg: (c1.ffmpeg - c0.ffmpeg) / secs, ffmpegs: Math.min(c0.ffmpegs, c1.ffmpegs) };
    } finally {
      await Promise.all(ids.map((id) => f.api(`/api/v1/browsers/${id}/stop`, { method: 'POST', key }).catch(() => undefined)));
    }
  };
  try {
    const unrecorded = await phase();
    await f.stack.kill('live-view');
    f.stack.opts.env!.RECORDING_ENABLED = 'true';
    await f.stack.startService('live-view');
    const recorded = await phase();
    return { browsers: n, measureMs, unrecordedCores: unrecorded.all, recordedCores: recorded.all, recordedFfmpegCores: recorded.ffmpeg, encoders: recorded.ffmpegs, perBrowserCores: (recorded.all - unrecorded.all) / n };
  } finally {
    await f.stop();
    await site.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await liveViewBench({ mode: process.env.BENCH_MODE === 'tsx' ? 'tsx' : 'dist', ...(process.env.BENCH_MS ? { measureMs: Number(process.env.BENCH_MS) } : {}) });
  const n = (x: number, d = 1) => x.toFixed(d);
  process.stdout.write(`load average at start: ${r.loadAverageAtStart.map((x) => n(x, 2)).join(' ')} (${os.cpus().length} cores)\n`);
  for (const v of r.viewers) {
    process.stdout.write(
      `  ${v.viewers} viewer(s): ${n(v.fpsMean)} fps (slowest ${n(v.fpsMin)}), latency p50 ${n(v.latencyP50Ms)} ms, p95 ${n(v.latencyP95Ms)} ms; straight from the pool ${n(v.poolFps)} fps, p50 ${n(v.poolLatencyP50Ms)} ms\n`,
    );
  }
  process.stdout.write(`  recording one animated browser: ${n(r.recordingOneBrowserCores, 3)} of a core, of which ffmpeg ${n(r.recordingFfmpegCores, 3)} (live-view idle ${n(r.idleLiveViewCores, 3)})\n`);
  for (const e of r.encoder) process.stdout.write(`  encoder ${e.preset} @ ${e.fps} fps: ${n(e.cores, 3)} of a core, ${n(e.kbps, 0)} kbit/s\n`);
  const sc = r.screencast;
  process.stdout.write(`  Chromium on an animated page: ${n(sc.noneCores, 3)} of a core without a screencast, ${n(sc.fullCores, 3)} screencasting every frame (${n(sc.fullFps)} fps), ${n(sc.pacedCores, 3)} paced to ${n(sc.pacedFps)} fps\n`);
  process.stdout.write(`  capacity: ${r.capacity.map((c) => `${c.browsers}→${n(c.fps)} fps`).join(', ')}; recorded browsers at ≥ 15 fps: ${r.maxRecordedBrowsersAt15Fps}\n`);
  process.stdout.write(`${JSON.stringify(r)}\n`);
}
