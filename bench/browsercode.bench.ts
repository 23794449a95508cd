/**
 * browsercode: what one terminal step costs. A run of N `true` commands through the service
 * (tool.call → tool.result: spawn in the run's sandbox as its own uid, stream, store the disk's changes, events),
 * next to spawning `bash -c true` straight from this process in the same run; and the same with
 * each command writing a 1 MiB file (the step then also stores an output file).
 */
import { spawn } from 'node:child_process';
import { readSse, type SseEvent } from '../test/support/sse.js';
import { startStackFixture } from '../test/support/stack-fixture.js';

export interface BrowsercodeFigures {
  commands: number;
  bareSpawnMsP50: number;
  stepMsP50: number;
  stepMsP95: number;
  /** Step time minus the command's own run time: events, disk sync, bookkeeping. */
  overheadMsP50: number;
  stepVsBareSpawn: number;
  writeStepMsP50: number;
  writeOverheadMsP50: number;
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

function bareSpawn(): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const c = spawn('/bin/bash', ['-c', 'true'], { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } });
    c.once('error', reject);
    c.once('close', () => resolve(performance.now() - t0));
  });
}

/** tool.call → tool.result wall time and the command's own duration, per shell step. */
function steps(events: SseEvent[]): { stepMs: number; commandMs: number }[] {
  const calls = new Map<number, number>();
  const out: { stepMs: number; commandMs: number }[] = [];
  for (const e of events) {
    const d = e.data.data as { number: number; durationMs?: number };
    const ts = Date.parse((e.data as unknown as { ts: string }).ts);
    if (e.event === 'tool.call') calls.set(d.number, ts);
    if (e.event === 'tool.result' && calls.has(d.number)) out.push({ stepMs: ts - calls.get(d.number)!, commandMs: d.durationMs ?? 0 });
  }
  return out;
}

export async function browsercodeBench(opts: { commands: number }): Promise<BrowsercodeFigures> {
  const f = await startStackFixture({ mode: 'dist', projects: ['bench'], env: { LOG_LEVEL: 'warn', RUN_MAX_STEPS: String(opts.commands * 2 + 10) } });
  const key = f.projects.bench!.key;
  const run = async (task: string) => {
    const res = await f.api('/api/v1/agents/browsercode/runs', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task, model: 'builtin' }) });
    if (res.status !== 202) throw new Error(`create ${res.status}: ${await res.text()}`);
    const { id } = (await res.json()) as { id: string };
    const events = await readSse(await f.api(`/api/v1/agents/browsercode/runs/${id}/events/stream`, { key }));
    if (events.at(-1)?.event !== 'run.completed') throw new Error(`run ended ${events.at(-1)?.event}: ${JSON.stringify(events.at(-1)?.data)}`);
    return steps(events);
  };
  try {
    const bare: number[] = [];
    const plain: { stepMs: number; commandMs: number }[] = [];
    const writes: { stepMs: number; commandMs: number }[] = [];
    // Alternate so both sides see the same machine.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < opts.commands; i++) bare.push(await bareSpawn());
      plain.push(...(await run(Array.from({ length: opts.commands }, () => 'Run `true`').join('. '))));
      writes.push(...(await run(Array.from({ length: opts.commands }, (_, i) => `Run \`head -c 1048576 /dev/urandom > out-${i}.bin\``).join('. '))));
    }
    const bareP50 = pct(bare, 50);
    const stepP50 = pct(plain.map((s) => s.stepMs), 50);
    return {
      commands: plain.length,
      bareSpawnMsP50: bareP50,
      stepMsP50: stepP50,
      stepMsP95: pct(plain.map((s) => s.stepMs), 95),
      overheadMsP50: pct(plain.map((s) => s.stepMs - s.commandMs), 50),
      stepVsBareSpawn: stepP50 / bareP50,
      writeStepMsP50: pct(writes.map((s) => s.stepMs), 50),
      writeOverheadMsP50: pct(writes.map((s) => s.stepMs - s.commandMs), 50),
    };
  } finally {
    await f.stop();
  }
}
