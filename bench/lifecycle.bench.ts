/**
 * Where a browser session's time goes, next to what a user could do without us, in one run on one
 * machine: create → CDP connect → goto a local page → release, timed part by part, for our stack
 * (defaults: recording on, confinement, egress proxy, CDP proxy), for a pre-launched bare Chromium
 * (connect, new page, goto, close: the floor) and for `puppeteer.launch` per session (launch,
 * first page, goto, close). The three take turns round by round, so they meet the same load.
 * Then back to back: c clients each run lifecycles in a loop; lifecycles/s for our stack and for
 * `puppeteer.launch` at the same c, c = 1, 4, 8, alternating too.
 */
import puppeteer, { type Browser } from 'puppeteer-core';
import { startFixtureSite, type FixtureSite } from '../services/browser-pool/src/testing/fixture-site.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';
import { ms, stats, type Stats } from './browser-pool.bench.js';

/** Chromium flags of the bare peers (what a user launching it themselves would pass). */
export const BARE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--headless=new'];
const CHROMIUM = '/usr/bin/chromium';

/** One lifecycle's parts (ms); for `puppeteer.launch`, `create` is the launch and `connect` 0. */
interface Parts {
  create: number;
  connect: number;
  goto: number;
  release: number;
  total: number;
}

export interface PartsFigures {
  create: Stats;
  connect: Stats;
  goto: Stats;
  release: Stats;
  total: Stats;
}

export interface LifecycleFigures {
  rounds: number;
  ours: PartsFigures;
  preLaunched: PartsFigures;
  launch: PartsFigures;
  /** ours total p50 / pre-launched total p50 (goal ≤ 1.5). */
  oursVsPreLaunched: number;
  /** Back to back: lifecycles/s per concurrency, ours and `puppeteer.launch`, and their ratio (goal ≥ 1.5). */
  backToBack: { c: number; ours: number; launch: number; ratio: number; oursP50Ms: number; launchP50Ms: number; errors: number; firstError?: string }[];
  errors: number;
}

const parts = (xs: Parts[]): PartsFigures => ({
  create: stats(xs.map((x) => x.create)),
  connect: stats(xs.map((x) => x.connect)),
  goto: stats(xs.map((x) => x.goto)),
  release: stats(xs.map((x) => x.release)),
  total: stats(xs.map((x) => x.total)),
});

/** One lifecycle, each part timed: `create` makes the browser, `connect` attaches a client, a page loads, `release` lets go. */
async function timed(site: FixtureSite, create: () => Promise<unknown>, connect: (made: unknown) => Promise<Browser>, release: (b: Browser, made: unknown) => Promise<void>, firstPage: 'existing' | 'new'): Promise<Parts> {
  const t0 = process.hrtime.bigint();
  const made = await create();
  const t1 = process.hrtime.bigint();
  const client = await connect(made);
  const t2 = process.hrtime.bigint();
  const page = firstPage === 'new' ? await client.newPage() : (await client.pages())[0]!;
  await page.goto(`${site.origin}/index.html`);
  if ((await page.title()) !== 'Fixture home') throw new Error('page not loaded');
  const t3 = process.hrtime.bigint();
  if (firstPage === 'new') await page.close();
  await release(client, made);
  const span = (a: bigint, b: bigint) => Number(b - a) / 1e6;
  return { create: span(t0, t1), connect: span(t1, t2), goto: span(t2, t3), release: ms(t3), total: ms(t0) };
}

/** The three peers' single lifecycles. */
function peers(f: StackFixture, site: FixtureSite, preLaunched: Browser) {
  const { key } = f.projects.bench!;
  const ours = () =>
    timed(
      site,
      async () => {
        const res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: '{}' });
        if (res.status !== 201) throw new Error(`POST /browsers: ${res.status} ${await res.text()}`);
        return (await res.json()) as { id: string; cdpUrl: string };
      },
      (b) => puppeteer.connect({ browserWSEndpoint: (b as { cdpUrl: string }).cdpUrl, defaultViewport: null }),
      async (client, b) => {
        await client.disconnect();
        const res = await f.api(`/api/v1/browsers/${(b as { id: string }).id}/stop`, { method: 'POST', key });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`stop: ${res.status}`);
      },
      'existing',
    );
  const bare = () =>
    timed(
      site,
      async () => preLaunched.wsEndpoint(),
      (ws) => puppeteer.connect({ browserWSEndpoint: ws as string, defaultViewport: null }),
      (client) => client.disconnect(),
      'new',
    );
  const launch = () =>
    timed(
      site,
      () => puppeteer.launch({ executablePath: CHROMIUM, args: BARE_ARGS, headless: true, defaultViewport: null }),
      async (b) => b as Browser,
      (client) => client.close(),
      'existing',
    );
  return { ours, bare, launch };
}

/** c clients running `cycle` back to back until `total` have run; lifecycles/s and their p50. */
async function backToBack(c: number, total: number, cycle: () => Promise<Parts>): Promise<{ perSecond: number; p50: number; errors: number; firstError?: string }> {
  let started = 0;
  let errors = 0;
  let firstError: string | undefined;
  const times: number[] = [];
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (started < total) {
        started++;
        try {
          times.push((await cycle()).total);
        } catch (err) {
          errors++;
          firstError ??= (err as Error).message.slice(0, 200);
        }
      }
    }),
  );
  const seconds = ms(t0) / 1000;
  return { perSecond: Math.round((times.length / seconds) * 100) / 100, p50: stats(times).p50, errors, ...(firstError ? { firstError } : {}) };
}

/** Runs the benchmark; `make bench` (BENCH_ONLY=lifecycle) prints and stores the figures. */
export async function lifecycleBench(o: { rounds: number; perClient: number; mode?: 'dist' | 'tsx' }): Promise<LifecycleFigures> {
  const site = await startFixtureSite();
  const f = await startStackFixture({ mode: o.mode ?? 'dist', projects: ['bench'], env: { LOG_LEVEL: 'warn', MAX_ACTIVE_BROWSERS_PER_PROJECT: '50' } });
  const preLaunched = await puppeteer.launch({ executablePath: CHROMIUM, args: BARE_ARGS, headless: true, defaultViewport: null });
  let errors = 0;
  try {
    const p = peers(f, site, preLaunched);
    const samples = { ours: [] as Parts[], bare: [] as Parts[], launch: [] as Parts[] };
    for (const peer of ['ours', 'bare', 'launch'] as const) await p[peer](); // warm-up: first connections, code paths
    for (let i = 0; i < o.rounds; i++) {
      for (const peer of ['ours', 'bare', 'launch'] as const) {
        try {
          samples[peer].push(await p[peer]());
        } catch {
          errors++;
        }
      }
    }
    const b2b: LifecycleFigures['backToBack'] = [];
    for (const c of [1, 4, 8]) {
      const total = Math.max(o.perClient * c, 8);
      const ours = await backToBack(c, total, p.ours);
      const launch = await backToBack(c, total, p.launch);
      b2b.push({ c, ours: ours.perSecond, launch: launch.perSecond, ratio: Math.round((ours.perSecond / launch.perSecond) * 100) / 100, oursP50Ms: ours.p50, launchP50Ms: launch.p50, errors: ours.errors + launch.errors, ...((ours.firstError ?? launch.firstError) ? { firstError: ours.firstError ?? launch.firstError } : {}) });
    }
    const ours = parts(samples.ours);
    const preLaunchedFigures = parts(samples.bare);
    return {
      rounds: o.rounds,
      ours,
      preLaunched: preLaunchedFigures,
      launch: parts(samples.launch),
      oursVsPreLaunched: Math.round((ours.total.p50 / preLaunchedFigures.total.p50) * 100) / 100,
      backToBack: b2b,
      errors,
    };
  } finally {
    await preLaunched.close();
    await f.stop();
    await site.close();
  }
}

/** The figures as `make bench` prints them. */
export function lifecycleReport(l: LifecycleFigures): string {
  const f = (n: number) => n.toFixed(0);
  const row = (name: string, x: PartsFigures) => `  ${name.padEnd(22)} ${f(x.total.p50).padStart(6)} ${[x.create, x.connect, x.goto, x.release].map((s) => f(s.p50)).join(' / ')}\n`;
  return (
    `  one lifecycle at a time, p50 ms (n=${l.rounds}): total   create / connect / goto / release\n` +
    row('ours (defaults)', l.ours) +
    row('bare, pre-launched', l.preLaunched) +
    row('puppeteer.launch', l.launch) +
    `  ours / pre-launched p50: ${l.oursVsPreLaunched.toFixed(2)} (goal ≤ 1.5)\n` +
    l.backToBack.map((b) => `  back to back c=${b.c}: ours ${b.ours.toFixed(2)}/s (p50 ${f(b.oursP50Ms)} ms), puppeteer.launch ${b.launch.toFixed(2)}/s (p50 ${f(b.launchP50Ms)} ms), ratio ${b.ratio.toFixed(2)} (goal ≥ 1.5)${b.errors ? `, ${b.errors} errors (first: ${b.firstError})` : ''}\n`).join('') +
    (l.errors ? `  ${l.errors} single lifecycles failed\n` : '')
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await lifecycleBench({ rounds: Number(process.env.BENCH_ROUNDS ?? 10), perClient: Number(process.env.BENCH_PER_CLIENT ?? 4), mode: (process.env.BENCH_MODE as 'dist' | 'tsx') ?? 'tsx' });
  process.stdout.write(lifecycleReport(figures));
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
}
