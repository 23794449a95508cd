/**
 * The stack's memory footprint: PSS of every process it runs (each service with its children —
 * Chromium's renderer, GPU and utility processes, ffmpeg — and the nats-server), with no session
 * and with 10 idle recorded sessions created through the API, and the CPU an idle recorded session
 * costs. Run on the current defaults and, in the same run, on the previous ones (the `before`
 * environment), so the figures are ratios.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';
import type { ProcessName } from '../scripts/stack.js';

const CLK_TCK = 100;
/** How long after the last session is created the idle CPU is measured: past the first part of every recording (10 s by default). */
const STEADY_AFTER_MS = 15_000;

/** One /proc entry: its parent and command name. */
interface Proc {
  ppid: number;
  comm: string;
}

function processes(): Map<number, Proc> {
  const procs = new Map<number, Proc>();
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(pid), { ppid: Number(f[1]), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
    } catch {
      /* exited meanwhile */
    }
  }
  return procs;
}

/** PSS in kB of one process (0 when it is gone or unreadable). */
function pssKb(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** CPU ticks so far of one process (user + system, with its reaped children: an ffmpeg that ended counts to live-view's own). */
function ticks(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  } catch {
    return 0;
  }
}

/** Every descendant of `root`, itself included. */
function tree(root: number, procs: Map<number, Proc>): number[] {
  const out = [root];
  for (let i = 0; i < out.length; i++) for (const [pid, p] of procs) if (p.ppid === out[i]) out.push(pid);
  return out;
}

export interface ProcessFootprint {
  process: ProcessName;
  /** PSS of the process alone, MB. */
  ownMb: number;
  /** PSS of its children (Chromiums, ffmpegs, helpers), MB. */
  childrenMb: number;
  children: number;
}

export interface FootprintPhase {
  sessions: number;
  processes: ProcessFootprint[];
  totalMb: number;
}

/** What the stack holds now, process by process. */
function measure(f: StackFixture, sessions: number): FootprintPhase {
  const procs = processes();
  const roots: [ProcessName, number][] = [...f.stack.children.entries()].map(([s, c]) => [s, c.pid!] as [ProcessName, number]);
  if (f.stack.database?.pid) roots.push(['database', f.stack.database.pid]);
  if (f.stack.nats?.pid) roots.push(['nats', f.stack.nats.pid]);
  const rows = roots.map(([name, pid]) => {
    const kids = tree(pid, procs).slice(1);
    return { process: name, ownMb: pssKb(pid) / 1024, childrenMb: kids.reduce((a, k) => a + pssKb(k), 0) / 1024, children: kids.length };
  });
  return { sessions, processes: rows, totalMb: rows.reduce((a, r) => a + r.ownMb + r.childrenMb, 0) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits (up to `timeoutMs`) until the stack's PSS has stayed within 2 % over the last 15 s:
 * start-up garbage collected, warm launches done. A shorter window is not enough: a stack just
 * started held the same 628 MB for its first 5 s, then 572 MB from 15 s on, once each process had
 * been idle long enough for V8's memory reducer (its idle collections) and malloc gave back what
 * the start had used.
 */
async function settled(f: StackFixture, sessions: number, timeoutMs: number): Promise<FootprintPhase> {
  const windowMs = 15_000;
  const everyMs = 2500;
  const samples = [measure(f, sessions)];
  for (const until = Date.now() + timeoutMs; Date.now() < until; ) {
    await sleep(everyMs);
    samples.push(measure(f, sessions));
    const recent = samples.slice(-(windowMs / everyMs + 1));
    const totals = recent.map((p) => p.totalMb);
    if (recent.length > windowMs / everyMs && Math.max(...totals) - Math.min(...totals) < Math.min(...totals) * 0.02) break;
  }
  return samples.at(-1)!;
}

export interface FootprintConfig {
  idle: FootprintPhase;
  loaded: FootprintPhase;
  /** CPU of one idle recorded session, fraction of a core (stack total over the window, less the idle stack's, per session). */
  perSessionCores: number;
  /** The same, process by process: its own CPU and its children's (Chromium, its supervisor, ffmpeg). */
  perSessionByProcess: Record<string, { own: number; children: number }>;
}

async function oneConfig(config: { env?: Record<string, string>; heapLimits?: boolean }, sessions: number, cpuWindowMs: number): Promise<FootprintConfig> {
  const f = await startStackFixture({
    mode: 'dist',
    heapLimits: config.heapLimits ?? true,
    ownNats: true,
    projects: ['bench'],
    logLevel: 'warn',
    env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: String(sessions + 2), BROWSER_IDLE_TIMEOUT_SECONDS: '0', RECORDING_ENABLED: 'true', ...config.env },
  });
  const key = f.projects.bench!.key;
  const roots = (): [string, number][] =>
    [...f.stack.children.entries()]
      .map(([s, c]) => [s, c.pid!] as [string, number])
      .concat(f.stack.database?.pid ? [['database', f.stack.database.pid]] : [])
      .concat(f.stack.nats?.pid ? [['nats', f.stack.nats.pid]] : []);
  /** CPU seconds so far, per process: its own and its children's (processes gone meanwhile are not counted). */
  const cpu = () => {
    const procs = processes();
    const by = new Map<string, { own: number; children: number }>();
    for (const [name, pid] of roots()) {
      const kids = tree(pid, procs).slice(1);
      by.set(name, { own: ticks(pid) / CLK_TCK, children: kids.reduce((a, k) => a + ticks(k), 0) / CLK_TCK });
    }
    return by;
  };
  /** Cores used over the window, per process (own, children) and in all. */
  const cores = async () => {
    const c0 = cpu();
    const t0 = Date.now();
    await sleep(cpuWindowMs);
    const c1 = cpu();
    const s = (Date.now() - t0) / 1000;
    const by: Record<string, { own: number; children: number }> = {};
    for (const [name, b] of c1) {
      const a = c0.get(name) ?? { own: 0, children: 0 };
      by[name] = { own: (b.own - a.own) / s, children: Math.max(0, b.children - a.children) / s };
    }
    return { total: Object.values(by).reduce((a, x) => a + x.own + x.children, 0), by };
  };
  const ids: string[] = [];
  try {
    const idle = await settled(f, 0, 90_000);
    const idleCores = await cores();
    for (let i = 0; i < sessions; i++) {
      // A launch that timed out on a loaded machine answers 503 "try again": as a client would, once more.
      let res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: '{}' });
      if (res.status === 503) res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: '{}' });
      if (res.status !== 201) throw new Error(`create browser: ${res.status} ${await res.text()}\n${f.logs('browser-pool').split('\n').slice(-15).join('\n')}`);
      const body = (await res.json()) as { id: string; cdpUrl: string };
      ids.push(body.id);
      const cdp = await puppeteer.connect({ browserWSEndpoint: body.cdpUrl, defaultViewport: null });
      const [page] = await cdp.pages();
      await page!.setContent('<h1>idle</h1><p>A still page.</p>');
      await cdp.disconnect();
    }
    const loaded = await settled(f, sessions, 90_000);
    // Steady state: each recording's first part (the page it showed) is cut and stored once, RECORDING_PART_MS in; then a still screen costs no more parts.
    await sleep(STEADY_AFTER_MS);
    const loadedCores = await cores();
    const perSessionByProcess: FootprintConfig['perSessionByProcess'] = {};
    for (const [name, l] of Object.entries(loadedCores.by)) {
      const i = idleCores.by[name] ?? { own: 0, children: 0 };
      perSessionByProcess[name] = { own: (l.own - i.own) / sessions, children: (l.children - i.children) / sessions };
    }
    return { idle, loaded, perSessionCores: (loadedCores.total - idleCores.total) / sessions, perSessionByProcess };
  } finally {
    await Promise.all(ids.map((id) => f.api(`/api/v1/browsers/${id}/stop`, { method: 'POST', key }).catch(() => undefined)));
    await f.stop();
  }
}

export interface FootprintFigures {
  sessions: number;
  cpuWindowMs: number;
  after: FootprintConfig;
  before: FootprintConfig;
  /** after/before total PSS with no session and with `sessions`. */
  idleRatio: number;
  loadedRatio: number;
}

/**
 * The previous defaults that are still settings: Node's own heap sizing and two warm browsers. What
 * is not a setting (PGlite's buffers and its initdb out of process, Chromium without a spare
 * renderer) is in both configurations, so the ratio understates the change.
 */
export const BEFORE = { heapLimits: false, env: { POOL_WARM_SIZE: '2' } };

export async function footprintBench(opts: { sessions?: number; cpuWindowMs?: number } = {}): Promise<FootprintFigures> {
  const sessions = opts.sessions ?? 10;
  const cpuWindowMs = opts.cpuWindowMs ?? 15_000;
  const before = await oneConfig(BEFORE, sessions, cpuWindowMs);
  const after = await oneConfig({}, sessions, cpuWindowMs);
  return { sessions, cpuWindowMs, after, before, idleRatio: after.idle.totalMb / before.idle.totalMb, loadedRatio: after.loaded.totalMb / before.loaded.totalMb };
}

/** The figures as the table `make bench` prints. */
export function footprintTable(r: FootprintFigures): string {
  const f = (n: number, d = 0) => n.toFixed(d);
  const lines: string[] = [];
  for (const [name, c] of [['before (previous defaults)', r.before], ['after (defaults)', r.after]] as const) {
    lines.push(`  ${name}`);
    lines.push('    process        own MB @0  children MB @0 (n)   own MB @' + r.sessions + '  children MB @' + r.sessions + ' (n)');
    for (const p of c.idle.processes) {
      const q = c.loaded.processes.find((x) => x.process === p.process) ?? p;
      lines.push(`    ${p.process.padEnd(13)}  ${f(p.ownMb).padStart(9)}  ${`${f(p.childrenMb)} (${p.children})`.padStart(18)}  ${f(q.ownMb).padStart(10)}  ${`${f(q.childrenMb)} (${q.children})`.padStart(19)}`);
    }
    lines.push(`    total PSS: ${f(c.idle.totalMb)} MB with no session, ${f(c.loaded.totalMb)} MB with ${r.sessions} idle recorded sessions; CPU per idle recorded session ${f(c.perSessionCores * 100, 2)} % of a core`);
    const parts = Object.entries(c.perSessionByProcess)
      .filter(([, x]) => Math.abs(x.own) + Math.abs(x.children) >= 0.0005)
      .map(([name, x]) => `${name} ${f(x.own * 100, 2)}${x.children ? ` + children ${f(x.children * 100, 2)}` : ''}`);
    lines.push(`    of which, % of a core per session: ${parts.join('; ')}`);
  }
  lines.push(`  after/before: ${f(r.idleRatio, 2)} with no session, ${f(r.loadedRatio, 2)} with ${r.sessions}`);
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await footprintBench({ ...(process.env.BENCH_SESSIONS ? { sessions: Number(process.env.BENCH_SESSIONS) } : {}) });
  process.stdout.write(`${footprintTable(r)}\n${JSON.stringify(r)}\n`);
}
