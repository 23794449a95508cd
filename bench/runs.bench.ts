/**
 * Runs: per-step overhead of the service with the builtin model (step wall time minus the browser
 * action itself), POST …/runs throughput and GET …/status p50/p99 at 32 clients, and create →
 * completed wall time of a one-step task next to a cold Chromium launch + the same page load
 * measured in the same run (what doing it yourself costs).
 */
import fs from 'node:fs';
import knexFactory from 'knex';
import { openDatabase } from '../services/common/src/db.js';
import { migrations as runMigrations } from '../services/run/src/run.repository.js';
import { newId } from '../services/common/src/ids.js';
import { launchTestChromium } from '../test/support/agent-loop.js';
import { postgresUrl, tempDir } from '../test/support/infra.js';
import { serveSite } from '../test/support/site.js';
import { readSse } from '../test/support/sse.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';
import { load, type LoadResult } from './support/load.js';

export interface RunFigures {
  stepOverheadMsP50: number;
  stepOverheadMsP95: number;
  stepActionMsP50: number;
  createRuns32: LoadResult;
  status32: LoadResult;
  oneStepCompletedMsP50: number;
  coldLaunchAndLoadMsP50: number;
  completedVsColdLaunch: number;
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const BASE = '/api/v1/agents/browser-agent';

async function createRun(f: StackFixture, key: string, task: string): Promise<{ id: string }> {
  const res = await f.api(`${BASE}/runs`, { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task, model: 'builtin' }) });
  if (res.status !== 202) throw new Error(`create ${res.status}: ${await res.text()}`);
  return (await res.json()) as { id: string };
}

async function untilEnd(f: StackFixture, key: string, id: string) {
  return readSse(await f.api(`${BASE}/runs/${id}/events/stream`, { key }));
}

export async function runsBench(opts: { loadMs: number; samples: number }): Promise<RunFigures> {
  const site = await serveSite();
  const f = await startStackFixture({ mode: 'dist', projects: ['steps', 'load'], env: { LOG_LEVEL: 'warn', MAX_RUNNING_RUNS_PER_PROJECT: '1', MAX_ACTIVE_BROWSERS_PER_PROJECT: '100' } });
  try {
    const steps = f.projects.steps!.key;
    const loadKey = f.projects.load!.key;

    // Per-step overhead: a 12-step task on a local page.
    const task = [`Open ${site.url('run-table.html')}`, ...Array.from({ length: 5 }, () => 'Scroll down. Scroll up'), 'Extract the title'].join('. ');
    const overhead: number[] = [];
    const action: number[] = [];
    for (let i = 0; i < 3; i++) {
      const { id } = await createRun(f, steps, task);
      for (const e of await untilEnd(f, steps, id)) {
        if (e.event !== 'step') continue;
        const d = e.data.data as { durationMs: number; actionMs: number };
        overhead.push(d.durationMs - d.actionMs);
        action.push(d.actionMs);
      }
    }

    // One-step create → completed, against a cold launch + load of the same page.
    const completed: number[] = [];
    const cold: number[] = [];
    for (let i = 0; i < opts.samples; i++) {
      const t0 = Date.now();
      const { id } = await createRun(f, steps, `Open ${site.url('run-table.html')}`);
      await untilEnd(f, steps, id);
      completed.push(Date.now() - t0);
      const t1 = Date.now();
      const b = await launchTestChromium();
      const page = await b.newPage();
      await page.goto(site.url('run-table.html'), { waitUntil: 'load' });
      cold.push(Date.now() - t1);
      await b.close();
    }

    // Throughput of creating runs: one run holds the project's only slot, so the rest stay queued.
    const blocker = await createRun(f, loadKey, `Open ${site.url('run-table.html')}. Wait for 'never'.`);
    const headers = { 'X-Service-API-Key': loadKey, 'Content-Type': 'application/json' };
    const createRuns32 = await load(`${f.stack.baseUrl}${BASE}/runs`, headers, 32, opts.loadMs, { method: 'POST', body: JSON.stringify({ task: 'Extract the title', model: 'builtin' }), expect: 202 });
    const status32 = await load(`${f.stack.baseUrl}${BASE}/runs/${blocker.id}/status`, headers, 32, opts.loadMs);
    return {
      stepOverheadMsP50: pct(overhead, 50),
      stepOverheadMsP95: pct(overhead, 95),
      stepActionMsP50: pct(action, 50),
      createRuns32,
      status32,
      oneStepCompletedMsP50: pct(completed, 50),
      coldLaunchAndLoadMsP50: pct(cold, 50),
      completedVsColdLaunch: pct(completed, 50) / pct(cold, 50),
    };
  } finally {
    await f.stop();
    await site.close();
  }
}

/** One driver's figures: creating runs through the API against bare INSERTs into a like table. */
export interface QueueFigures {
  driver: 'pglite' | 'postgres';
  runs: number;
  concurrency: number;
  createMsP50: number;
  createMsP99: number;
  createSeconds: number;
  /** From the first POST until no run is queued or running. */
  drainSeconds: number;
  insertMsP50: number;
  insertMsP99: number;
  insertSeconds: number;
  createVsInsertP50: number;
  createVsInsertTotal: number;
}

/** Runs `n` calls of `fn` on `concurrency` loops; the latency of each in ms. */
async function closedLoop(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<{ ms: number[]; seconds: number }> {
  const ms: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < n; i = next++) {
        const t = performance.now();
        await fn(i);
        ms.push(performance.now() - t);
      }
    }),
  );
  return { ms, seconds: (performance.now() - t0) / 1000 };
}

async function bareInserts(databaseUrl: string | undefined, n: number, concurrency: number) {
  const dataDir = tempDir('bare');
  // The run service's own tables, so the baseline INSERT writes the same row into the same indexes.
  const db = await openDatabase({ service: 'bare', dataDir, databaseUrl, migrations: runMigrations });
  try {
    return await closedLoop(n, concurrency, async () => {
      await db.knex('runs').insert({ id: newId('run'), project_id: 'prj_bench', agent: 'browsercode', session_id: newId('ses'), status: 'queued', task: "Answer 'ok'.", model: 'builtin', browser_options: '{}', missing_file_ids: '[]' });
    });
  } finally {
    await db.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const RUNS = '/api/v1/agents/browsercode/runs';

/**
 * `runs` browsercode runs (the builtin model answering at once: no browser, no command, so the
 * queue and the database set the pace) created at `concurrency`, then drained by the run service
 * with its default limits; the same count of bare INSERTs into a like table, same driver, same run.
 */
async function queueOn(driver: 'pglite' | 'postgres', databaseUrl: string | undefined, runs: number, concurrency: number): Promise<QueueFigures> {
  const f = await startStackFixture({ mode: 'dist', projects: ['queue'], databaseUrl, env: { LOG_LEVEL: 'warn' } });
  let created: { ms: number[]; seconds: number };
  let drainSeconds: number;
  try {
    const key = f.projects.queue!.key;
    const post = { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: "Answer 'ok'.", model: 'builtin' }) };
    const t0 = performance.now();
    created = await closedLoop(runs, concurrency, async () => {
      const res = await f.api(RUNS, post);
      if (res.status !== 202) throw new Error(`create ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    });
    const left = async (status: string) => ((await (await f.api(`${RUNS}?status=${status}&limit=1`, { key })).json()) as { items: unknown[] }).items.length;
    while ((await left('queued')) + (await left('running')) > 0) await new Promise((r) => setTimeout(r, 100));
    drainSeconds = (performance.now() - t0) / 1000;
    const notCompleted = ['failed', 'stopped'];
    for (const s of notCompleted) if (await left(s)) throw new Error(`some runs ended ${s}: ${f.logs('run').slice(-2000)}`);
  } finally {
    await f.stop();
  }
  const bare = await bareInserts(databaseUrl, runs, concurrency);
  const createMsP50 = pct(created.ms, 50);
  const insertMsP50 = pct(bare.ms, 50);
  return {
    driver,
    runs,
    concurrency,
    createMsP50,
    createMsP99: pct(created.ms, 99),
    createSeconds: created.seconds,
    drainSeconds,
    insertMsP50,
    insertMsP99: pct(bare.ms, 99),
    insertSeconds: bare.seconds,
    createVsInsertP50: createMsP50 / insertMsP50,
    createVsInsertTotal: created.seconds / bare.seconds,
  };
}

/** The queue figures on PGlite, and on Postgres when one runs on 127.0.0.1 (in a database of its own, dropped after). */
export async function runQueueBench(opts: { runs: number; concurrency: number }): Promise<QueueFigures[]> {
  const out = [await queueOn('pglite', undefined, opts.runs, opts.concurrency)];
  const server = await postgresUrl();
  if (!server) return out;
  const name = `ats_bench_${Date.now().toString(36)}`;
  const admin = knexFactory({ client: 'pg', connection: server, pool: { min: 0, max: 1 } });
  await admin.raw(`create database "${name}"`);
  try {
    const url = new URL(server);
    url.pathname = `/${name}`;
    out.push(await queueOn('postgres', url.toString(), opts.runs, opts.concurrency));
  } finally {
    await admin.raw(`drop database if exists "${name}" with (force)`);
    await admin.destroy();
  }
  return out;
}
