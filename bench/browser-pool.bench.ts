/**
 * Browser lifecycle through the real stack: `POST /browsers` → 201 alone, and create → connect
 * over CDP (puppeteer, through the proxy) → goto a local page → stop, sequential and at 4
 * concurrent; p50/p95. Run against a warm pool and against a pool of size 0 (every browser
 * launched on demand) in the same run, next to a bare Chromium launch as the baseline.
 * "Paced" figures start each sample with the pool refilled (1.5 s apart); back-to-back ones
 * show what a 2-core machine does while it refills.
 */
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { createLogger } from '../services/common/src/logger.js';
import { LiveBrowser } from '../services/browser-pool/src/live-browser.js';
import { startFixtureSite, type FixtureSite } from '../services/browser-pool/src/testing/fixture-site.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';
import { hostConfinement } from '../services/browser-pool/src/testing/confinement.js';
import type { BrowserConfinement } from '../services/browser-pool/src/confinement.js';
import { groupMembers } from '../services/browser-pool/src/process-groups.js';
import { defaultChromiumPath } from '../services/browser-pool/src/config.js';

export interface Stats {
  n: number;
  p50: number;
  p95: number;
  min: number;
  max: number;
}

export interface PoolFigures {
  warmSize: number;
  /** POST /browsers → 201, each started with the pool refilled. */
  provisionMs: Stats;
  /** create → connect → goto → stop, each started with the pool refilled. */
  lifecycleMs: Stats;
  /** The same cycle back to back (the pool refills while the next cycles run). */
  lifecycleBackToBackMs: Stats;
  /** The same cycle run by 4 clients at once (per-cycle latency). */
  lifecycle4Ms: Stats;
  errors: number;
}

/** One confinement mode, in-process: launch → first page loaded, and the memory of the browser then. */
export interface ConfinementFigures {
  launchToLoadMs: Stats;
  /** Proportional set size of every process of one browser with one page loaded (MiB). */
  pssMiB: Stats;
}

export interface BrowserPoolFigures {
  warm: PoolFigures;
  /** The warm pool with BROWSER_CONFINEMENT=off (the unconfined baseline; the egress proxy stays). */
  warmUnconfined: PoolFigures;
  /** warm lifecycle p50 / unconfined warm lifecycle p50. */
  confinedLifecycleRatio: number;
  confined: ConfinementFigures;
  unconfined: ConfinementFigures;
  cold: PoolFigures;
  /** Chromium launched and prepared in-process, no service around it. */
  bareLaunchMs: Stats;
  /** warm p50 / cold p50. */
  provisionRatio: number;
  lifecycleRatio: number;
}

export interface BrowserPoolBenchOptions {
  rounds: number;
  warmSize?: number;
  mode?: 'dist' | 'tsx';
}

/** Percentiles of samples (ms), rounded to 0.1. */
export function stats(xs: number[]): Stats {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  const r = (v: number) => Math.round(v * 10) / 10;
  return { n: s.length, p50: r(at(0.5)), p95: r(at(0.95)), min: r(s[0] ?? NaN), max: r(s[s.length - 1] ?? NaN) };
}

export const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

async function measurePool(warmSize: number, o: BrowserPoolBenchOptions, site: FixtureSite, env: Record<string, string> = {}): Promise<PoolFigures> {
  const f: StackFixture = await startStackFixture({
    mode: o.mode ?? 'dist',
    projects: ['bench'],
    env: { LOG_LEVEL: 'warn', POOL_WARM_SIZE: String(warmSize), MAX_ACTIVE_BROWSERS_PER_PROJECT: '50', ...env },
  });
  const { key } = f.projects.bench!;
  let errors = 0;
  const create = async () => {
    const res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: '{}' });
    if (res.status !== 201) throw new Error(`POST /browsers: ${res.status} ${await res.text()}`);
    return (await res.json()) as { id: string; cdpUrl: string };
  };
  const stop = async (id: string) => {
    const res = await f.api(`/api/v1/browsers/${id}/stop`, { method: 'POST', key });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`stop: ${res.status}`);
  };
  const cycle = async () => {
    const t0 = process.hrtime.bigint();
    const b = await create();
    const client = await puppeteer.connect({ browserWSEndpoint: b.cdpUrl, defaultViewport: null });
    const [page] = await client.pages();
    await page!.goto(`${site.origin}/index.html`);
    if ((await page!.title()) !== 'Fixture home') throw new Error('page not loaded');
    await client.disconnect();
    await stop(b.id);
    return ms(t0);
  };
  const settle = () => new Promise((r) => setTimeout(r, 1500)); // lets the pool refill (launches run in the background)
  try {
    await settle();
    await cycle(); // warm-up: first connections, code paths
    await settle();
    const provision: number[] = [];
    for (let i = 0; i < o.rounds; i++) {
      const t0 = process.hrtime.bigint();
      const b = await create();
      provision.push(ms(t0));
      await stop(b.id);
      await settle();
    }
    const lifecycle: number[] = [];
    for (let i = 0; i < o.rounds; i++) {
      try {
        lifecycle.push(await cycle());
      } catch {
        errors++;
      }
      await settle();
    }
    const backToBack: number[] = [];
    for (let i = 0; i < o.rounds; i++) {
      try {
        backToBack.push(await cycle());
      } catch {
        errors++;
      }
    }
    await settle();
    const lifecycle4: number[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < Math.max(2, Math.ceil(o.rounds / 4)); i++) {
          try {
            lifecycle4.push(await cycle());
          } catch {
            errors++;
          }
        }
      }),
    );
    return { warmSize, provisionMs: stats(provision), lifecycleMs: stats(lifecycle), lifecycleBackToBackMs: stats(backToBack), lifecycle4Ms: stats(lifecycle4), errors };
  } finally {
    await f.stop();
  }
}

/** One browser launched and prepared in-process, as the pool does it. */
function launchOne(dir: string, i: number, confinement: BrowserConfinement, stealth = true): Promise<LiveBrowser> {
  return LiveBrowser.launch({
    executable: defaultChromiumPath(),
    rootDir: dir,
    id: `brw_bench${i}`,
    stealth,
    width: 1280,
    height: 800,
    confinement,
    egress: { allowPrivateNetworks: true, deniedLocalPorts: new Set() },
    logger: createLogger('bench', 'silent'),
    screencast: { quality: 60, everyNthFrame: 1, maxWidth: 0, maxHeight: 0 },
  });
}

async function bareLaunches(rounds: number, dir: string): Promise<Stats> {
  const times: number[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const t0 = process.hrtime.bigint();
      const b = await launchOne(dir, i, hostConfinement());
      times.push(ms(t0));
      await b.shutdown();
      await b.chromium.removed;
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return stats(times);
}

/** Proportional set size (KiB) of a process group's members. */
function groupPssKiB(pgid: number): number {
  let total = 0;
  for (const pid of groupMembers(pgid)) {
    try {
      total += Number(/^Pss:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return total;
}

/** Launch → page loaded and the browser's memory then, for one confinement, in-process (no service around it). */
async function launchAndLoad(rounds: number, dir: string, site: FixtureSite, confinement: BrowserConfinement): Promise<ConfinementFigures> {
  const times: number[] = [];
  const pss: number[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const t0 = process.hrtime.bigint();
      const b = await launchOne(dir, i, confinement);
      const sessionId = await b.tabs.session(b.tabs.activeId!);
      await b.chromium.conn.send('Page.enable', {}, sessionId);
      const loaded = b.chromium.conn.waitFor('Page.loadEventFired', (_p, s) => s === sessionId, 20000);
      await b.chromium.conn.send('Page.navigate', { url: `${site.origin}/index.html` }, sessionId);
      await loaded;
      times.push(ms(t0));
      pss.push(groupPssKiB(b.chromium.pgid) / 1024);
      await b.shutdown();
      await b.chromium.removed;
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { launchToLoadMs: stats(times), pssMiB: stats(pss) };
}

/** Runs the benchmark; `make bench` prints and stores the figures. */
export async function browserPoolBench(o: BrowserPoolBenchOptions): Promise<BrowserPoolFigures> {
  const site = await startFixtureSite();
  try {
    const warm = await measurePool(o.warmSize ?? 2, o, site);
    const cold = await measurePool(0, o, site);
    const warmUnconfined = await measurePool(o.warmSize ?? 2, o, site, { BROWSER_CONFINEMENT: 'off' });
    const n = Math.min(o.rounds, 10);
    const tmp = process.env.TMPDIR ?? '/tmp';
    // Interleaved so both modes meet the same machine load.
    const confined: ConfinementFigures[] = [];
    const unconfined: ConfinementFigures[] = [];
    const off = { ...hostConfinement(), uidBase: undefined, namespaces: false, userns: false, pidNamespace: false, policyDir: undefined, sandbox: process.getuid?.() !== 0 };
    for (let i = 0; i < n; i++) {
      confined.push(await launchAndLoad(1, path.join(tmp, `ats-bench-conf-${process.pid}`), site, hostConfinement()));
      unconfined.push(await launchAndLoad(1, path.join(tmp, `ats-bench-unconf-${process.pid}`), site, off));
    }
    const merge = (xs: ConfinementFigures[]): ConfinementFigures => ({
      launchToLoadMs: stats(xs.map((x) => x.launchToLoadMs.p50)),
      pssMiB: stats(xs.map((x) => x.pssMiB.p50)),
    });
    const bareLaunchMs = await bareLaunches(Math.min(o.rounds, 10), path.join(process.env.TMPDIR ?? '/tmp', `ats-bench-launch-${process.pid}`));
    return {
      warm,
      warmUnconfined,
      confinedLifecycleRatio: Math.round((warm.lifecycleMs.p50 / warmUnconfined.lifecycleMs.p50) * 100) / 100,
      confined: merge(confined),
      unconfined: merge(unconfined),
      cold,
      bareLaunchMs,
      provisionRatio: Math.round((warm.provisionMs.p50 / cold.provisionMs.p50) * 100) / 100,
      lifecycleRatio: Math.round((warm.lifecycleMs.p50 / cold.lifecycleMs.p50) * 100) / 100,
    };
  } finally {
    await site.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await browserPoolBench({ rounds: Number(process.env.BENCH_ROUNDS ?? 20), mode: (process.env.BENCH_MODE as 'dist' | 'tsx') ?? 'tsx' });
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}

/** Stealth on vs off, in-process and alternating: launch → fingerprint presented → a page loaded → stop (p50 each). */
export interface StealthCostFigures {
  onMs: Stats;
  offMs: Stats;
  /** on p50 / off p50 (goal: within 1.05). */
  ratio: number;
}

export async function stealthCostBench(rounds: number): Promise<StealthCostFigures> {
  const site = await startFixtureSite();
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'bench-stealth-'));
  const times = { on: [] as number[], off: [] as number[] };
  try {
    for (let i = 0; i < rounds * 2; i++) {
      const stealth = i % 2 === 0;
      const t0 = process.hrtime.bigint();
      const b = await launchOne(dir, i, hostConfinement(), stealth);
      await b.present({ hardware: stealth ? { hardwareConcurrency: 8 } : null, locale: 'en-US', timezone: 'UTC' });
      const sessionId = await b.tabs.session(b.tabs.activeId!);
      await b.chromium.conn.send('Page.enable', {}, sessionId);
      const loaded = b.chromium.conn.waitFor('Page.loadEventFired', (_p, s) => s === sessionId, 20000);
      await b.chromium.conn.send('Page.navigate', { url: `${site.origin}/index.html` }, sessionId);
      await loaded;
      await b.shutdown();
      await b.chromium.removed;
      (stealth ? times.on : times.off).push(ms(t0));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await site.close();
  }
  const on = stats(times.on);
  const off = stats(times.off);
  return { onMs: on, offMs: off, ratio: on.p50 / off.p50 };
}
