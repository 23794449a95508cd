/**
 * What routing a browser's calls to its owner costs. create → CDP connect → goto → stop through the
 * real stack on Postgres, one replica of every service vs two behind the per-call balancer (half the
 * calls, and half the CDP connections, land on the replica that does not run the browser and are
 * forwarded); and the CDP round trip (`Runtime.evaluate('1')`) of one browser through its owner's
 * proxy vs through the other replica's, which relays it, alternating in rounds.
 */
import type { Knex } from 'knex';
import puppeteer, { type CDPSession } from 'puppeteer-core';
import { startFixtureSite, type FixtureSite } from '../services/browser-pool/src/testing/fixture-site.js';
import { freshDatabase, postgresUrl } from '../test/support/infra.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';
import { ms, stats, type Stats } from './browser-pool.bench.js';

export interface PoolReplicasFigures {
  /** create → connect → goto → stop, one replica of each service. */
  oneReplicaLifecycleMs: Stats;
  /** The same with two replicas of each service, per-call balancing. */
  twoReplicasLifecycleMs: Stats;
  /** two / one (p50). */
  lifecycleRatio: number;
  /** p50 of each step of the cycle (where a hop is added: connect relayed, stop forwarded). */
  oneReplicaStepsMs: Steps;
  twoReplicasStepsMs: Steps;
  /** One `Runtime.evaluate('1')` through the owner's CDP proxy. */
  ownerRoundTripMs: Stats;
  /** The same through the other replica's proxy (relayed to the owner). */
  relayedRoundTripMs: Stats;
  /** relayed − owner (p50), the relay hop. */
  relayHopMs: number;
  errors: number;
}

export interface Steps {
  create: number;
  connect: number;
  goto: number;
  stop: number;
}

export interface PoolReplicasBenchOptions {
  /** Lifecycles per stack. */
  rounds: number;
  /** Round trips per proxy. */
  roundTrips: number;
  mode?: 'dist' | 'tsx';
}

/** A stack of `replicas` on a database of its own, dropped afterwards. */
async function withStack<T>(pg: string, replicas: number, o: PoolReplicasBenchOptions, fn: (f: StackFixture, db: Knex) => Promise<T>): Promise<T> {
  const fresh = await freshDatabase(pg, `ats_bench_pool_${replicas}`);
  let f: StackFixture | undefined;
  try {
    f = await startStackFixture({
      mode: o.mode ?? 'dist',
      databaseUrl: fresh.url,
      replicas,
      projects: ['bench'],
      env: { LOG_LEVEL: 'warn', POOL_WARM_SIZE: '1', MAX_ACTIVE_BROWSERS_PER_PROJECT: '50', RECORDING_ENABLED: 'false' },
    });
    return await fn(f, fresh.knex);
  } finally {
    await f?.stop();
    await fresh.drop();
  }
}

async function lifecycles(f: StackFixture, site: FixtureSite, rounds: number): Promise<{ samples: number[]; errors: number; steps: Steps }> {
  const { key } = f.projects.bench!;
  const call = async (path: string, method: string, status: number) => {
    const res = await f.api(`/api/v1${path}`, { method, key, headers: { 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) });
    const text = await res.text();
    if (res.status !== status) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as { id: string; cdpUrl: string };
  };
  const steps: Record<keyof Steps, number[]> = { create: [], connect: [], goto: [], stop: [] };
  const cycle = async () => {
    const t0 = process.hrtime.bigint();
    let t = t0;
    const lap = (k: keyof Steps) => {
      const at = process.hrtime.bigint();
      steps[k].push(Number(at - t) / 1e6);
      t = at;
    };
    const b = await call('/browsers', 'POST', 201);
    lap('create');
    const client = await puppeteer.connect({ browserWSEndpoint: b.cdpUrl, defaultViewport: null });
    lap('connect');
    const [page] = await client.pages();
    await page!.goto(`${site.origin}/index.html`);
    if ((await page!.title()) !== 'Fixture home') throw new Error('page not loaded');
    lap('goto');
    await client.disconnect();
    await call(`/browsers/${b.id}/stop`, 'POST', 200);
    lap('stop');
    return ms(t0);
  };
  // Each cycle starts with the warm pools refilled (launches run in the background).
  const settle = () => new Promise((r) => setTimeout(r, 1500));
  const samples: number[] = [];
  let errors = 0;
  await settle();
  await cycle().catch(() => errors++); // warm-up: first connections, code paths
  for (const k of Object.keys(steps) as (keyof Steps)[]) steps[k] = [];
  for (let i = 0; i < rounds; i++) {
    await settle();
    try {
      samples.push(await cycle());
    } catch {
      errors++;
    }
  }
  const p50 = (k: keyof Steps) => stats(steps[k]).p50;
  return { samples, errors, steps: { create: p50('create'), connect: p50('connect'), goto: p50('goto'), stop: p50('stop') } };
}

/** `Runtime.evaluate('1')` round trips of one browser through the owner's proxy and through the other's, alternating in rounds of 20. */
async function roundTrips(f: StackFixture, db: Knex, site: FixtureSite, n: number): Promise<{ owner: number[]; relayed: number[] }> {
  const { key } = f.projects.bench!;
  const res = await f.api('/api/v1/browsers', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: '{}' });
  const b = (await res.json()) as { id: string; cdpUrl: string };
  const edges = [f.stack.edgePorts.get('cdp')!, f.stack.replicas.find((r) => r.service === 'browser-pool')!.edgePorts.get('cdp')!];
  // The owner's edge, from the browser's record and its instance's advertised proxy.
  const row = await db('browser_pool.browsers').where({ id: b.id }).first();
  const instance = await db('browser_pool.instances').where({ id: row.instance_id }).first();
  const ownerPort = Number(String(instance.cdp_url).split(':').pop());
  const ownerEdge = edges.find((p) => p === ownerPort)!;
  const otherEdge = edges.find((p) => p !== ownerPort)!;
  const session = async (port: number): Promise<{ s: CDPSession; close(): Promise<void> }> => {
    const client = await puppeteer.connect({ browserWSEndpoint: b.cdpUrl.replace(/:\d+\//, `:${port}/`), defaultViewport: null });
    const [page] = await client.pages();
    await page!.goto(`${site.origin}/index.html`);
    const s = await page!.createCDPSession();
    return { s, close: () => client.disconnect() };
  };
  const direct = await session(ownerEdge);
  const relayed = await session(otherEdge);
  const out = { owner: [] as number[], relayed: [] as number[] };
  const time = async (s: CDPSession) => {
    const t0 = process.hrtime.bigint();
    await s.send('Runtime.evaluate', { expression: '1' });
    return ms(t0);
  };
  for (let i = 0; i < 20; i++) await Promise.all([time(direct.s), time(relayed.s)]); // warm-up
  for (let done = 0; done < n; done += 20) {
    for (let i = 0; i < 20; i++) out.owner.push(await time(direct.s));
    for (let i = 0; i < 20; i++) out.relayed.push(await time(relayed.s));
  }
  await direct.close();
  await relayed.close();
  await f.api(`/api/v1/browsers/${b.id}/stop`, { method: 'POST', key });
  return out;
}

export async function poolReplicasBench(o: PoolReplicasBenchOptions): Promise<PoolReplicasFigures> {
  const pg = await postgresUrl();
  if (!pg) throw new Error('the replica benchmark needs Postgres on 127.0.0.1:5432');
  const site = await startFixtureSite();
  try {
    const one = await withStack(pg, 1, o, (f) => lifecycles(f, site, o.rounds));
    const { two, rtt } = await withStack(pg, 2, o, async (f, db) => ({ two: await lifecycles(f, site, o.rounds), rtt: await roundTrips(f, db, site, o.roundTrips) }));
    const oneStats = stats(one.samples);
    const twoStats = stats(two.samples);
    const owner = stats(rtt.owner);
    const relayed = stats(rtt.relayed);
    return {
      oneReplicaLifecycleMs: oneStats,
      twoReplicasLifecycleMs: twoStats,
      lifecycleRatio: Math.round((twoStats.p50 / oneStats.p50) * 100) / 100,
      oneReplicaStepsMs: one.steps,
      twoReplicasStepsMs: two.steps,
      ownerRoundTripMs: owner,
      relayedRoundTripMs: relayed,
      relayHopMs: Math.round((relayed.p50 - owner.p50) * 100) / 100,
      errors: one.errors + two.errors,
    };
  } finally {
    await site.close();
  }
}
