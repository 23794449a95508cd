/**
 * Runs: per-step overhead of the service with the builtin model (step wall time minus the browser
 * action itself), POST …/runs throughput and GET …/status p50/p99 at 32 clients, and create →
 * completed wall time of a one-step task next to a cold Chromium launch + the same page load
 * measured in the same run (what doing it yourself costs).
 */
import puppeteer from 'puppeteer-core';
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
      const b = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'] });
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
