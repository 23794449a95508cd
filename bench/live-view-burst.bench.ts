/**
 * Live view under a burst: `browsers` started at once while live-view is asked all along (gRPC
 * MintLiveViewUrl and GetRecording, the gateway's GET /browsers/{id}/recording); p50/p99/max of
 * those answers and how late recordings start, with every browser in one cgroup weighing 256
 * against each service thread's 1024 (POOL_BROWSER_CPU_SHARES=256, now) against the same stack
 * with browsers only niced (the baseline, POOL_BROWSER_CPU_SHARES=0; both POOL_BROWSER_NICE=10),
 * one stack after the other in the same run.
 *
 * Run alone: `BENCH_ONLY=live-view-burst npx tsx bench/run.ts` (BENCH_BURST_BROWSERS, default 10; BENCH_BROWSER_CPU_SHARES, default 256).
 */
import { liveViewBurst, type BurstFigures } from '../test/support/live-view-burst.js';
import { startStackFixture } from '../test/support/stack-fixture.js';

export interface BurstRound extends Omit<BurstFigures, 'created' | 'recordingLateMs' | 'recordingAfterReplyMs'> {
  mode: string;
  /** Latest recording start after its browser's creation (Chromium's launch included) and after its create reply. */
  recordingLateMaxMs: number;
  recordingAfterReplyMaxMs: number;
}

export interface LiveViewBurstFigures {
  browsers: number;
  rounds: BurstRound[];
  /** Baseline p99 / p99 now (above 1: faster now). */
  p99Ratio: number;
  maxRatio: number;
}

async function round(mode: string, shares: number, browsers: number): Promise<BurstRound> {
  const f = await startStackFixture({
    mode: process.env.BENCH_MODE === 'tsx' ? 'tsx' : 'dist',
    projects: ['bench'],
    logLevel: 'info', // the recorder's "recording started" lines are the measure of recording starts
    env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: String(browsers + 1), POOL_BROWSER_NICE: '10', POOL_BROWSER_CPU_SHARES: String(shares) },
  });
  try {
    const project = f.projects.bench!;
    const fig = await liveViewBurst(f, project, browsers, { timeoutMs: 120000 });
    await Promise.all(fig.created.map((b) => f.api(`/api/v1/browsers/${b.id}/stop`, { method: 'POST', key: project.key })));
    const { created: _created, recordingLateMs, recordingAfterReplyMs, ...rest } = fig;
    return { mode, ...rest, recordingLateMaxMs: Math.max(...recordingLateMs), recordingAfterReplyMaxMs: Math.max(...recordingAfterReplyMs) };
  } finally {
    await f.stop();
  }
}

export async function liveViewBurstBench(o: { browsers: number }): Promise<LiveViewBurstFigures> {
  const shares = Number(process.env.BENCH_BROWSER_CPU_SHARES ?? 256);
  const before = await round('browsers nice 10 alone (before)', 0, o.browsers);
  const after = await round(`browsers in a cgroup, shares ${shares} (after)`, shares, o.browsers);
  return { browsers: o.browsers, rounds: [before, after], p99Ratio: before.p99Ms / after.p99Ms, maxRatio: before.maxMs / after.maxMs };
}
