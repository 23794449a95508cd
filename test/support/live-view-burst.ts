/**
 * A burst of browsers started at once against the real stack, with live-view asked all along (its
 * gRPC MintLiveViewUrl and GetRecording straight, and the gateway's GET /browsers/{id}/recording),
 * each answer timed. Shared by test/live-view-burst.test.ts and bench/live-view-burst.bench.ts.
 */
import { LiveViewMode, LiveViewServiceService } from '../../gen/ats/liveview/v1/live_view.js';
import { createServiceClient } from '../../services/common/src/grpc.js';
import type { BrowserRecord } from './recordings.js';
import type { StackFixture, TestProject } from './stack-fixture.js';
import { until } from './until.js';

export interface BurstFigures {
  browsers: number;
  /** Browsers created (201) and those whose create reply had a live view link. */
  created: BrowserRecord[];
  withLinkAtCreate: number;
  /** Every answer of live-view during the burst (ms): gRPC mint, gRPC GetRecording, gateway GET …/recording. */
  calls: number;
  failed: number;
  /** The answers of creates that failed (status and body). */
  createErrors: string[];
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** How late each browser's recording started after the browser's creation, Chromium's launch included (ms, live-view's own measure). */
  recordingLateMs: number[];
  /** From each create's reply (the browser usable) to its recording started (ms; negative: started before the reply came). */
  recordingAfterReplyMs: number[];
  /** From the first create to the last recording started (ms). */
  burstMs: number;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
}

/** `browserId → { lateMs, atMs }` of every "recording started" line live-view printed so far. */
export function recordingStarts(f: StackFixture): Map<string, { lateMs: number; atMs: number }> {
  const out = new Map<string, { lateMs: number; atMs: number }>();
  for (const line of f.logs('live-view').split('\n')) {
    const i = line.indexOf('{');
    if (i < 0 || !line.includes('recording started')) continue;
    try {
      const o = JSON.parse(line.slice(i)) as { msg?: string; browserId?: string; lateMs?: number; time?: string };
      if (o.msg === 'recording started' && o.browserId) out.set(o.browserId, { lateMs: o.lateMs ?? 0, atMs: Date.parse(o.time ?? '') });
    } catch {
      /* not a JSON line */
    }
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Creates `n` browsers at once in `project` while two probes ask live-view every `probeEveryMs`;
 * returns once every browser's recording started (or `timeoutMs`). The browsers stay active.
 */
export async function liveViewBurst(f: StackFixture, project: TestProject, n: number, o: { probeEveryMs?: number; timeoutMs?: number } = {}): Promise<BurstFigures> {
  const lv = createServiceClient(LiveViewServiceService, `127.0.0.1:${f.stack.ports.get('live-view')}`, 30000, f.stack.internalToken);
  const repliedAt = new Map<string, number>();
  /** Why creates failed (status and body), for the test's message. */
  const createErrors: string[] = [];
  const create = async (): Promise<BrowserRecord | undefined> => {
    const res = await f.api('/api/v1/browsers', { method: 'POST', key: project.key, headers: { 'content-type': 'application/json' }, body: '{}' });
    if (res.status !== 201) {
      createErrors.push(`${res.status} ${await res.text()}`);
      return undefined;
    }
    const b = (await res.json()) as BrowserRecord;
    repliedAt.set(b.id, Date.now());
    return b;
  };
  // A browser of before the burst: its recording is asked about during it.
  const anchor = await create();
  if (!anchor) throw new Error('the anchor browser was not created');
  await until(() => recordingStarts(f).has(anchor.id), { timeoutMs: 30000, intervalMs: 100, what: 'the anchor recording' });

  const latencies: number[] = [];
  let failed = 0;
  let probing = true;
  const timed = async (call: () => Promise<unknown>) => {
    const t0 = performance.now();
    try {
      await call();
      latencies.push(performance.now() - t0);
    } catch {
      failed++;
      latencies.push(performance.now() - t0);
    }
  };
  const probe = async (calls: (() => Promise<unknown>)[]) => {
    while (probing) {
      for (const c of calls) await timed(c);
      await sleep(o.probeEveryMs ?? 50);
    }
  };
  const ref = { projectId: project.projectId, browserId: anchor.id };
  const probes = [
    probe([() => lv.api.mintLiveViewUrl({ ...ref, mode: LiveViewMode.LIVE_VIEW_MODE_VIEW, ttlSeconds: 60 }), () => lv.api.getRecording(ref)]),
    probe([
      async () => {
        const res = await f.api(`/api/v1/browsers/${anchor.id}/recording`, { key: project.key });
        await res.arrayBuffer();
        // Recording (409, not finished yet) is the answer expected; a 5xx is live-view not answering.
        if (res.status >= 500) throw new Error(`GET …/recording ${res.status}`);
      },
    ]),
  ];
  const began = Date.now();
  try {
    const created = (await Promise.all(Array.from({ length: n }, create))).filter((b): b is BrowserRecord => !!b);
    await until(() => created.every((b) => recordingStarts(f).has(b.id)), { timeoutMs: o.timeoutMs ?? 60000, intervalMs: 100, what: `every recording of the burst started\n${f.logs('live-view').split('\n').slice(-30).join('\n')}` });
    const burstMs = Date.now() - began;
    const starts = recordingStarts(f);
    return {
      browsers: n,
      created: [anchor, ...created],
      createErrors,
      withLinkAtCreate: created.filter((b) => b.liveViewUrl).length,
      calls: latencies.length,
      failed,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
      recordingLateMs: created.map((b) => starts.get(b.id)!.lateMs),
      recordingAfterReplyMs: created.map((b) => starts.get(b.id)!.atMs - repliedAt.get(b.id)!),
      burstMs,
    };
  } finally {
    probing = false;
    await Promise.all(probes);
    lv.close();
  }
}
