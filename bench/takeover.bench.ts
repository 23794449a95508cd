/**
 * What a worker's death costs a run. Two run replicas on Postgres on one host (a replica sees the other's
 * process gone, whatever the lease: RUN_LEASE_MS as given, 2 s unless told); each round runs
 * the same nine-step builtin task twice, alternating: once undisturbed (the baseline) and once with
 * the replica holding it killed (SIGKILL) right after its first step. Figures: the takeover gap
 * (kill → the next step, recorded by the other replica) beside the lease and an ordinary gap between
 * two steps, and the run's duration killed vs undisturbed.
 */
import assert from 'node:assert/strict';
import { freshDatabase, postgresUrl } from '../test/support/infra.js';
import { serveSite } from '../test/support/site.js';
import { readSse, type SseEvent } from '../test/support/sse.js';
import { startStackFixture } from '../test/support/stack-fixture.js';
import { stats, type Stats } from './browser-pool.bench.js';

export interface TakeoverFigures {
  leaseMs: number;
  /** Kill → the next step, per killed run. */
  takeoverGapMs: Stats;
  /** Between two consecutive steps of the undisturbed runs (after the first two). */
  stepGapMs: Stats;
  /** Run duration (run.started → terminal event). */
  undisturbedMs: Stats;
  killedMs: Stats;
  /** killed / undisturbed (p50). */
  durationRatio: number;
  /** takeover gap p50 − lease: what the takeover adds beyond waiting out the lease. */
  beyondLeaseMs: number;
}

const BASE = '/api/v1/agents/browser-agent';
const ts = (e: SseEvent) => Date.parse(String((e.data as { ts?: string }).ts));

export async function takeoverBench(o: { rounds: number; leaseMs?: number; mode?: 'dist' | 'tsx' }): Promise<TakeoverFigures> {
  const pg = await postgresUrl();
  if (!pg) throw new Error('the takeover bench needs Postgres on 127.0.0.1:5432');
  const leaseMs = o.leaseMs ?? 2000;
  const site = await serveSite();
  const db = await freshDatabase(pg, 'ats_bench_takeover');
  const f = await startStackFixture({
    mode: o.mode ?? 'dist',
    databaseUrl: db.url,
    replicas: { run: 2 },
    projects: ['bench'],
    env: { LOG_LEVEL: 'warn', RUN_LEASE_MS: String(leaseMs), DEFAULT_MODEL: 'builtin', POOL_WARM_SIZE: '1', RECORDING_ENABLED: 'false' },
  });
  const key = f.projects.bench!.key;
  const task =
    `Open ${site.url('run-slow.html?ms=1500')}. Wait for 'Shop ready'. Click 'Continue to the order form'. Type 'Ada Lovelace' into 'Full name'. ` +
    `Type 'ada@example.com' into 'you@example.com'. Select 'Blue' from 'Colour'. Click 'Place order'. Wait for 'Thank you'. Extract the text of '#confirmation'.`;
  const start = async () => {
    const res = await f.api(`${BASE}/runs`, { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task, model: 'builtin' }) });
    assert.equal(res.status, 202, await res.clone().text());
    return ((await res.json()) as { id: string }).id;
  };
  const events = async (id: string, until?: (e: SseEvent) => boolean) => readSse(await f.api(`${BASE}/runs/${id}/events/stream`, { key }), until);
  const duration = (all: SseEvent[]) => ts(all.at(-1)!) - ts(all.find((e) => e.event === 'run.started')!);
  const gaps: number[] = [];
  const takeovers: number[] = [];
  const undisturbed: number[] = [];
  const killed: number[] = [];
  try {
    for (let i = 0; i < o.rounds; i++) {
      const calm = await events(await start());
      assert.equal(calm.at(-1)!.event, 'run.completed', JSON.stringify(calm.at(-1)));
      const steps = calm.filter((e) => e.event === 'step').map(ts);
      for (let k = 2; k < steps.length - 1; k++) gaps.push(steps[k + 1]! - steps[k]!);
      undisturbed.push(duration(calm));

      const id = await start();
      await events(id, (e) => e.event === 'step');
      const { rows } = await db.knex.raw('select lease_owner from "run".runs where id = ?', [id]);
      const n = Number(/^run-(\d+)\./.exec(rows[0].lease_owner)![1]);
      const killedAt = Date.now();
      await f.stack.kill('run', n);
      const all = await events(id);
      assert.equal(all.at(-1)!.event, 'run.completed', `${JSON.stringify(all.at(-1))}\n${f.logs('run').slice(-6000)}`);
      const from = Number((all.find((e) => e.event === 'run.resumed')!.data.data as { fromStep: number }).fromStep);
      takeovers.push(ts(all.find((e) => e.event === 'step' && Number(e.data.data.number) > from)!) - killedAt);
      killed.push(duration(all));
      await f.stack.revive('run', n);
    }
  } finally {
    await f.stop();
    await db.drop();
    await site.close();
  }
  const takeoverGapMs = stats(takeovers);
  const undisturbedMs = stats(undisturbed);
  const killedMs = stats(killed);
  return {
    leaseMs,
    takeoverGapMs,
    stepGapMs: stats(gaps),
    undisturbedMs,
    killedMs,
    durationRatio: Math.round((killedMs.p50 / undisturbedMs.p50) * 100) / 100,
    beyondLeaseMs: Math.round(takeoverGapMs.p50 - leaseMs),
  };
}
