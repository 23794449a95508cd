/**
 * Browsers on two replicas of every service (one Postgres, one NATS), tried with both balancing
 * modes: every call about a browser reaches the replica that runs it, whichever replica a client,
 * the gateway, the run service or live view lands on; one CDP edge serves every browser; a killed
 * pool replica's browsers are reported stopped within the heartbeat timeout and free their slots;
 * a replica stopped with SIGTERM drains before it stops its browsers. Every browser is recorded
 * (two live-view replicas), and every stopped browser's recording is finished, also when its pool
 * replica was killed (the lengths of recordings across replicas are measured with live view).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser as CdpBrowser } from 'puppeteer-core';
import { WebSocket } from 'ws';
import { Agent } from '../gen/ats/common/v1/common.js';
import { BrowserPoolServiceService } from '../gen/ats/browserpool/v1/browser_pool.js';
import { groupMembers } from '../services/browser-pool/src/process-groups.js';
import { createServiceClient } from '../services/common/src/grpc.js';
import { CREATE_DEADLINE_MS } from '../services/run/src/browser-capacity.js';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { serveSite, type TestSite } from './support/site.js';
import { readSse } from './support/sse.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const pg = await postgresUrl();
const HEARTBEAT_INTERVAL_MS = 500;
const HEARTBEAT_TIMEOUT_MS = 3000;
/** At SIGTERM, how long a pool replica's running browsers go on. */
const DRAIN_MS = 2000;
/**
 * A service's budget for its whole graceful stop: the drain, then stopping its browsers with their
 * profiles saved, then deregistering. 5 s ran out before the deregistration on a loaded machine.
 */
const SHUTDOWN_MS = 15_000;
/** Active browsers per project. */
const LIMIT = 6;
/** Browsers or runs at once: what two shared cores drive without timing out. */
const CONCURRENCY = 4;
/** Enough to land on both replicas through both gateways and both CDP edges, in each balancing mode. */
const BROWSERS = 8;
const RUNS = 8;

interface BrowserJson {
  id: string;
  status: string;
  cdpUrl: string;
  liveViewUrl: string | null;
  profileId: string | null;
}

/** Runs `fn` over `items`, `n` at a time, keeping the order of the results. */
async function limited<T, R>(items: T[], n: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** The first message of each kind a live view socket sends: its hello, then a frame. */
function liveViewHelloAndFrame(liveViewUrl: string): Promise<{ hello: Record<string, unknown>; frameBytes: number }> {
  const u = new URL(liveViewUrl);
  const ws = new WebSocket(`ws://${u.host}${u.pathname}/ws${u.search}`);
  return new Promise((resolve, reject) => {
    let hello: Record<string, unknown> | undefined;
    const timer = setTimeout(() => fail(new Error('no hello and frame within 20 s')), 20_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      ws.terminate();
      reject(err);
    };
    ws.on('message', (data: Buffer, binary: boolean) => {
      if (!binary) hello ??= JSON.parse(data.toString()) as Record<string, unknown>;
      else if (hello) {
        clearTimeout(timer);
        ws.close();
        resolve({ hello, frameBytes: data.length });
      }
    });
    ws.on('close', (code, reason) => fail(new Error(`live view closed: ${code} ${reason.toString()}`)));
    ws.on('error', fail);
  });
}

for (const balancing of ['per-call', 'pinned'] as const) {
  describe(`browsers on two pool replicas, ${balancing} balancing`, { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
    let f: StackFixture;
    let site: TestSite;
    let fresh: FreshDatabase;

    before(async () => {
      fresh = await freshDatabase(pg!, `ats_browsers_${balancing.replace('-', '_')}`);
      site = await serveSite();
      f = await startStackFixture({
        databaseUrl: fresh.url,
        replicas: 2,
        balancing,
        projects: ['main', 'runs', 'profile', 'kill', 'drain'],
        shutdownTimeoutMs: SHUTDOWN_MS,
        env: {
          POOL_WARM_SIZE: '1',
          MAX_ACTIVE_BROWSERS_PER_PROJECT: String(LIMIT),
          MAX_RUNNING_RUNS_PER_PROJECT: String(CONCURRENCY),
          POOL_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS),
          POOL_HEARTBEAT_TIMEOUT_MS: String(HEARTBEAT_TIMEOUT_MS),
          POOL_DRAIN_TIMEOUT_MS: String(DRAIN_MS),
          // Replicas as pods on separate nodes: a killed or drained one's browsers end (test/pool-restart covers one host).
          POOL_KEEP_BROWSERS_ON_EXIT: 'false',
          // A stopped browser's Chromium ends at once (the tests find its processes by the browser's pid).
          POOL_REUSE_SECONDS: '0',
          DEFAULT_MODEL: 'builtin',
        },
      });
    });
    after(async () => {
      await f?.stop();
      await site?.close();
      await fresh?.drop();
    });
    const db = (table: string) => fresh.knex(`browser_pool.${table}`);

    type Project = 'main' | 'runs' | 'profile' | 'kill' | 'drain';
    const gatewayPorts = () => [f.stack.gatewayPort, ...f.stack.replicas.filter((r) => r.service === 'gateway').map((r) => r.port)];
    /** A call to gateway `gw` (0 or 1); the first one's replies are checked against the OpenAPI document. */
    const api = (p: Project, method: string, path: string, body?: unknown, gw = 0) => {
      const init = { method, headers: { 'content-type': 'application/json', 'x-service-api-key': f.projects[p]!.key }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) };
      return gw === 0 ? f.api(`/api/v1${path}`, init) : fetch(`http://127.0.0.1:${gatewayPorts()[gw]}/api/v1${path}`, init);
    };
    const ok = async <T>(res: Response, status = 200): Promise<T> => {
      const text = await res.text();
      assert.equal(res.status, status, text);
      return JSON.parse(text) as T;
    };
    /** The pool replica (1 or 2) that runs a browser, from its record and the instance's address. */
    const ownerOf = async (browserId: string): Promise<{ replica: number; pid: number }> => {
      const row = await db('browsers').where({ id: browserId }).first();
      const instance = await db('instances').where({ id: row.instance_id }).first();
      const port = Number(String(instance.grpc_addr).split(':').pop());
      return { replica: port === f.stack.ports.get('browser-pool') ? 1 : 2, pid: Number(row.pid) };
    };
    const cdpEdge = (n: number) => (n === 1 ? f.stack.edgePorts.get('cdp')! : f.stack.replicas.find((r) => r.service === 'browser-pool' && r.n === n)!.edgePorts.get('cdp')!);
    const onEdge = (cdpUrl: string, n: number) => cdpUrl.replace(/:\d+\//, `:${cdpEdge(n)}/`);
    const stop = (p: Project, id: string, gw = 0) => api(p, 'POST', `/browsers/${id}/stop`, undefined, gw).then((r) => ok<BrowserJson>(r));
    /**
     * A browser created on pool replica `n`, asked of that replica directly (a balancer decides
     * where the gateway's calls go); everything else about it goes through the public API.
     */
    const createOn = async (p: Project, n: number, profileId?: string): Promise<BrowserJson> => {
      const port = n === 1 ? f.stack.ports.get('browser-pool')! : f.stack.replicas.find((r) => r.service === 'browser-pool' && r.n === n)!.port;
      const pool = createServiceClient(BrowserPoolServiceService, `127.0.0.1:${port}`, CREATE_DEADLINE_MS, f.stack.internalToken);
      try {
        const { browser } = await pool.api.createBrowser({ projectId: f.projects[p]!.projectId, profileId, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] });
        assert.equal((await ownerOf(browser!.id)).replica, n);
        return { id: browser!.id, status: 'active', cdpUrl: browser!.cdpUrl, liveViewUrl: browser!.liveViewUrl, profileId: browser!.profileId ?? null };
      } finally {
        pool.close();
      }
    };
    /** Waits until a stopped browser's recording is finished: GET …/recording answers 409 while it is made, then 200 with its link. */
    const recordingReady = (p: Project, id: string, gw = 0) =>
      until(
        async () => {
          const res = await api(p, 'GET', `/browsers/${id}/recording`, undefined, gw);
          const text = await res.text();
          assert.ok(res.status === 200 || res.status === 409, `${id}: recording ${res.status} ${text}`);
          return res.status === 200 && (JSON.parse(text) as { url: string }).url;
        },
        { timeoutMs: 60_000, intervalMs: 250, what: `the recording of ${id}` },
      );
    const connect = (cdpUrl: string) => puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });
    const firstPage = async (b: CdpBrowser) => (await b.pages())[0] ?? (await b.newPage());

    test(`when ${BROWSERS} browsers are created, driven through their cdpUrl on either CDP edge, watched and stopped, each through either gateway, then all ${BROWSERS} work and no Chromium is left`, async () => {
      const results = await limited(Array.from({ length: BROWSERS }, (_, i) => i), CONCURRENCY, async (i) => {
        const gw = i % 2;
        // The last two are asked of replica 1 and 2 themselves, so both run browsers whatever the balancer chose for the rest:
        // round robin skips a replica whose connection is not up yet, and a gateway whose calls alternate create, stop, create
        // sends every create to one replica (once, all eight landed on replica 1).
        const created = i < BROWSERS - 2 ? await ok<BrowserJson>(await api('main', 'POST', '/browsers', {}, gw), 201) : await createOn('main', 1 + gw);
        const owner = await ownerOf(created.id);
        // The public cdpUrl names the first replica's edge (one Ingress); every other browser goes through the second's.
        const cdp = await connect(i % 4 < 2 ? created.cdpUrl : onEdge(created.cdpUrl, 2));
        const page = await firstPage(cdp);
        await page.goto(site.url('index.html'));
        const title = await page.title();
        // A browser created while live-view was slow to answer gets its link on a later read.
        const link = created.liveViewUrl ?? (await until(async () => (await ok<BrowserJson>(await api('main', 'GET', `/browsers/${created.id}`, undefined, gw))).liveViewUrl, { timeoutMs: 30_000, what: `a live view link for ${created.id}` }));
        const watched = await liveViewHelloAndFrame(link);
        await cdp.disconnect();
        const stopped = await stop('main', created.id, 1 - gw);
        return { owner, title, watched, stopped };
      });
      assert.deepEqual(results.map((r) => r.title), Array(BROWSERS).fill('Fixture home'));
      assert.ok(results.every((r) => r.watched.hello.t === 'hello' && r.watched.frameBytes > 16), 'every viewer got a hello and a frame');
      assert.deepEqual(results.map((r) => r.stopped.status), Array(BROWSERS).fill('stopped'));
      assert.deepEqual([...new Set(results.map((r) => r.owner.replica))].sort(), [1, 2], 'both replicas ran browsers');
      // A stop answers once the browser is recorded stopped; its process ends right after.
      for (const r of results) await until(() => groupMembers(r.owner.pid).length === 0, { timeoutMs: 20_000, what: `Chromium ${r.owner.pid} gone` });
      const active = await ok<{ items: unknown[] }>(await api('main', 'GET', '/browsers?status=active'));
      assert.deepEqual(active.items, []);
      for (const [i, r] of results.entries()) assert.match(await recordingReady('main', r.stopped.id, i % 2), /^http/, `${r.stopped.id} has its recording`);
    });

    test(`when ${RUNS} builtin runs are started through either gateway, then all ${RUNS} complete with the page's answer`, async () => {
      const BASE = '/agents/browser-agent/runs';
      const task = `Open ${site.url('run-table.html')}. Extract the table as JSON.`;
      const created = await Promise.all(Array.from({ length: RUNS }, (_, i) => api('runs', 'POST', BASE, { task, model: 'builtin' }, i % 2).then((r) => ok<{ id: string }>(r, 202))));
      const runs = await limited(created, CONCURRENCY * 2, async ({ id }) => {
        const res = await api('runs', 'GET', `${BASE}/${id}/events/stream`);
        assert.equal(res.status, 200);
        await readSse(res);
        return ok<{ status: string; result: string; error: string | null }>(await api('runs', 'GET', `${BASE}/${id}`));
      });
      assert.deepEqual(runs.map((r) => `${r.status} ${r.error ?? ''}`.trim()), Array(RUNS).fill('completed'));
      for (const r of runs) assert.deepEqual(JSON.parse(r.result), [{ Product: 'Lamp', Price: '25' }, { Product: 'Desk', Price: '140' }, { Product: 'Chair', Price: '60' }]);
    });

    test('when a profile is logged in on one replica and stopped through the other, then a browser with it on the other replica has the cookie', async () => {
      const profile = await ok<{ id: string }>(await api('profile', 'POST', '/browser-profiles', { name: 'across replicas' }), 201);
      const first = await createOn('profile', 1, profile.id);
      const cdp = await connect(first.cdpUrl);
      const page = await firstPage(cdp);
      await page.goto(site.url('index.html'));
      await page.evaluate(() => (document.cookie = 'who=ada; max-age=3600; path=/'));
      await cdp.disconnect();
      await stop('profile', first.id, 1);
      // The stop answers before its owner has saved the profile (in the background): a create on the other replica right away waits for that save.
      const second = await createOn('profile', 2, profile.id);
      const saved = await ok<{ cookieDomains: string[] }>(await api('profile', 'GET', `/browser-profiles/${profile.id}`));
      assert.deepEqual(saved.cookieDomains, ['127.0.0.1'], 'saved by the owner at stop');

      const again = await connect(second.cdpUrl);
      const page2 = await firstPage(again);
      await page2.goto(site.url('index.html'));
      assert.match(await page2.evaluate(() => document.cookie), /(^|; )who=ada(;|$)/);
      await again.disconnect();
      await stop('profile', second.id);
    });

    test('when a pool replica is killed (SIGKILL), then its browsers are reported stopped within the heartbeat timeout, their Chromium is gone and the project can fill its limit again', async () => {
      const onTwo = [await createOn('kill', 2), await createOn('kill', 2)];
      const onOne = [await createOn('kill', 1)];
      const watcher = await connect(onTwo[0]!.cdpUrl); // through the first replica's edge, relayed to the second
      const cut = new Promise<void>((r) => watcher.once('disconnected', () => r()));
      const pids = await Promise.all(onTwo.map(async (b) => (await ownerOf(b.id)).pid));

      const killedAt = Date.now();
      await f.stack.kill('browser-pool', 2);
      await cut;
      for (const b of onTwo) {
        await until(async () => {
          const res = await api('kill', 'GET', `/browsers/${b.id}`);
          return res.status === 200 && ((await res.json()) as BrowserJson).status === 'stopped';
        }, { timeoutMs: HEARTBEAT_TIMEOUT_MS + 10_000, intervalMs: 100, what: `${b.id} reported stopped` });
      }
      const tookMs = Date.now() - killedAt;
      assert.ok(tookMs < HEARTBEAT_TIMEOUT_MS + 3 * HEARTBEAT_INTERVAL_MS + 2000, `reported stopped ${tookMs} ms after the kill`);
      const reasons = await db('browsers').whereIn('id', onTwo.map((b) => b.id)).pluck('stop_reason');
      assert.deepEqual(reasons, ['owner_lost', 'owner_lost']);
      await until(() => pids.every((pid) => groupMembers(pid).length === 0), { timeoutMs: 10_000, what: "the killed replica's Chromium gone" });
      // Pinned, one live-view replica reaches the pool only through the killed replica (its
      // recording.ready event needs the browser from the pool). A real balancer would move its
      // connection to a live pod; here the pod comes back, as Kubernetes restarts it.
      if (balancing === 'pinned') await f.stack.revive('browser-pool', 2);
      for (const b of onTwo) assert.match(await recordingReady('kill', b.id), /^http/, `${b.id}: its recording is finished, not left recording`);

      // The slots are free: the project fills its limit again (on the replica left), and no more.
      const more = [];
      for (let i = onOne.length; i < LIMIT; i++) more.push(await ok<BrowserJson>(await api('kill', 'POST', '/browsers', {}), 201));
      const refused = await api('kill', 'POST', '/browsers', {});
      assert.equal(refused.status, 429, await refused.text());
      for (const b of [...onOne, ...more]) await stop('kill', b.id);
      assert.deepEqual((await ok<{ items: unknown[] }>(await api('kill', 'GET', '/browsers?status=active'))).items, [], 'nothing active is left');
      if (balancing === 'pinned') await f.stack.kill('browser-pool', 2); // as the tests below expect it: gone
    });

    test('when the last pool replica is stopped (SIGTERM), then its running browser goes on for the drain time, a new one is refused, and then it is stopped with its profile saved and the replica deregistered', async () => {
      const profile = await ok<{ id: string }>(await api('drain', 'POST', '/browser-profiles', { name: 'drained' }), 201);
      const running = await ok<BrowserJson>(await api('drain', 'POST', '/browsers', { browser_profile_id: profile.id }), 201);
      const cdp = await connect(running.cdpUrl);
      const page = await firstPage(cdp);
      await page.goto(site.url('index.html'));
      await page.evaluate(() => (document.cookie = 'drained=yes; max-age=3600; path=/'));
      const cut = new Promise<number>((r) => cdp.once('disconnected', () => r(Date.now())));

      const termAt = Date.now();
      const stopped = f.stack.kill('browser-pool', 1, 'SIGTERM');
      await until(async () => (await db('instances').where({ draining: true }).first()) !== undefined, { what: 'the replica draining' });
      const refused = await api('drain', 'POST', '/browsers', {});
      assert.equal(refused.status, 503, await refused.text());
      assert.equal(await page.evaluate(() => document.title), 'Fixture home', 'the running browser still works');
      await stopped;
      assert.ok((await cut) - termAt >= DRAIN_MS - 200, `cut ${(await cut) - termAt} ms after SIGTERM, after the drain time`);
      const row = await db('browsers').where({ id: running.id }).first();
      assert.deepEqual([row.status, row.stop_reason], ['stopped', 'shutdown']);
      const saved = await fresh.knex('browser_pool.profiles').where({ id: profile.id }).first();
      assert.deepEqual(JSON.parse(saved.cookie_domains), ['127.0.0.1'], 'its profile was saved at the stop');
      assert.deepEqual(await db('instances').select('id'), [], 'no pool replica is registered any more');
      assert.deepEqual(groupMembers(Number(row.pid)), []);
    });
  });
}
