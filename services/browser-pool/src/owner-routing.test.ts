/**
 * Two pool replicas in one process, each with its own gRPC server, CDP proxy and Chromium folder,
 * on one database (PGlite), with real Chromium and a movable clock for heartbeats: a call about a
 * browser that lands on the other replica reaches the owner; a forwarded call is not forwarded
 * again; a dead owner's browser is reported stopped instead of hanging.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import puppeteer from 'puppeteer-core';
import { tempDir } from '../../../test/support/infra.js';
import { until, within } from '../../../test/support/until.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { RemoteError, Status } from '../../common/src/errors.js';
import { createServiceClient, type GrpcServer, type ServiceClient } from '../../common/src/grpc.js';
import { InternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { Signer } from '../../common/src/signing.js';
import { Agent } from '../../../gen/ats/common/v1/common.js';
import { BrowserPoolServiceService, BrowserStatus, StopReason, type StreamFramesResponse } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { BrowserPool } from './browser-pool.js';
import { BrowserRepository, type BrowserRow } from './browser.repository.js';
import { CdpProxy } from './cdp-proxy.js';
import { Downloads } from './downloads.js';
import { InstanceRepository } from './instance.repository.js';
import { Instances } from './instances.js';
import { migrations } from './migrations.js';
import { FORWARDED_TO_HEADER, OwnerRouter } from './owner-routing.js';
import { groupMembers } from './process-groups.js';
import { ProfileRepository } from './profile.repository.js';
import { Profiles } from './profiles.js';
import { Proxies } from './proxies.js';
import { createBrowserPoolServer } from './server.js';
import { hostConfinement } from './testing/confinement.js';
import { upgradeStatus } from './testing/upgrade-status.js';
import { startFixtureSite, type FixtureSite } from './testing/fixture-site.js';
import { defaultChromiumPath } from './config.js';

const logger = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');
const TIMEOUT_MS = 20_000;
let now = Date.now();
const clock = () => now;
const token = InternalToken.generate();
const signer = new Signer('routing-test-secret-0123456789-0123456789', clock);
const P = 'prj_routing';
/** Active browsers per project (small, so that a reclaim can be seen). */
const CAP = 2;

interface Replica {
  name: string;
  pool: BrowserPool;
  instances: Instances;
  server: GrpcServer;
  proxy: CdpProxy;
  client: ServiceClient<typeof BrowserPoolServiceService>;
  cdpPort: number;
  events: { kind: string; row: BrowserRow }[];
}

let db: Database;
let dataDir: string;
let site: FixtureSite;
const replicas: Replica[] = [];

async function replica(name: string): Promise<Replica> {
  const browsers = new BrowserRepository(db.knex, db.driver);
  const profiles = new Profiles({ repo: new ProfileRepository(db.knex), maxStateBytes: 1 << 20, logger, now: clock });
  const events: Replica['events'] = [];
  let pool!: BrowserPool;
  const instances = new Instances({
    repo: new InstanceRepository(db.knex),
    id: name,
    // The test beats and reaps by hand (tick), on the movable clock.
    heartbeatIntervalMs: 3_600_000,
    heartbeatTimeoutMs: TIMEOUT_MS,
    token,
    grpcDeadlineMs: 5000,
    logger,
    now: clock,
    onReaped: (r) => pool.announceReaped(r.browsers),
    onBeat: () => pool.endStoppedElsewhere(),
  });
  const router = new OwnerRouter({ runsHere: (id) => pool.runsHere(id), browsers, instances, logger, now: clock });
  const proxy = new CdpProxy({ backend: { live: (id) => pool.live(id), publicUrl: (b) => pool.publicUrl(b), owner: (id, to) => router.cdpOwner(id, to) }, signer, logger });
  const cdpPort = await proxy.listen('127.0.0.1', 0);
  pool = new BrowserPool({
    browsers,
    profiles,
    downloads: new Downloads({ repo: browsers, store: { put: async () => {}, sign: async (p, k) => `mem://${p}/${k}` }, logger, ttlSeconds: 900 }),
    liveView: { mint: async (_p, id) => `http://live.test/browsers/${id}` },
    events: { publish: (kind, row) => events.push({ kind, row }) },
    proxies: new Proxies(new Map()),
    egress: { allowPrivateNetworks: true, deniedLocalPorts: [cdpPort] },
    signer,
    cdpWsBase: `ws://127.0.0.1:${cdpPort}`,
    cdpInternalBase: `ws://127.0.0.1:${cdpPort}`,
    instanceId: name,
    endElsewhere: (row) => router.endAtOwner(row),
    rootDir: path.join(dataDir, name),
    chromium: { executable: defaultChromiumPath(), confinement: hostConfinement(), extraArgs: [] },
    screencast: { quality: 50, everyNthFrame: 1, maxWidth: 0, maxHeight: 0 },
    warmSize: 0,
    maxActivePerProject: CAP,
    defaultTimeoutMinutes: 60,
    idleTimeoutSeconds: 0,
    reaperIntervalMs: 60000,
    defaultWidth: 800,
    defaultHeight: 600,
    logger,
    now: clock,
  });
  await pool.start();
  const server = createBrowserPoolServer({ logger, pool, profiles, token, router });
  const port = await server.listen('127.0.0.1', 0);
  await instances.start({ grpcAddr: `127.0.0.1:${port}`, cdpUrl: `ws://127.0.0.1:${cdpPort}` });
  const r: Replica = { name, pool, instances, server, proxy, client: createServiceClient(BrowserPoolServiceService, `127.0.0.1:${port}`, 15000, token), cdpPort, events };
  replicas.push(r);
  return r;
}

/**
 * The frames of `stream` until `done` holds of those seen so far (then the call is cancelled) or
 * the stream ends; fails, naming what came, when neither happens within `timeoutMs`.
 */
function frames(stream: grpc.ClientReadableStream<StreamFramesResponse>, done: (seen: StreamFramesResponse[]) => boolean, timeoutMs = 30_000): Promise<StreamFramesResponse[]> {
  const seen: StreamFramesResponse[] = [];
  return new Promise<StreamFramesResponse[]>((resolve, reject) => {
    const timer = setTimeout(() => {
      stream.cancel();
      reject(new Error(`no such frame within ${timeoutMs} ms; came: ${JSON.stringify(seen.map((f) => ({ title: f.title, url: f.url, jpeg: f.jpeg.length })))}`));
    }, timeoutMs);
    stream.on('data', (f: StreamFramesResponse) => {
      seen.push(f);
      if (done(seen)) stream.cancel();
    });
    stream.on('end', () => (clearTimeout(timer), resolve(seen)));
    stream.on('error', (err: grpc.ServiceError) => (clearTimeout(timer), err.code === grpc.status.CANCELLED ? resolve(seen) : reject(err)));
  });
}

const forwardedTo = (id: string) => ({ metadata: { [FORWARDED_TO_HEADER]: id } });
const code = (c: Status) => (err: unknown) => err instanceof RemoteError && err.code === c;
const onPort = (url: string, port: number) => url.replace(/:\d+\//, `:${port}/`);

let a: Replica;
let b: Replica;

before(async () => {
  dataDir = tempDir('bp-routing');
  db = await openDatabase({ service: 'browser-pool', dataDir, migrations });
  site = await startFixtureSite();
  a = await replica('pool-a');
  b = await replica('pool-b');
});

after(async () => {
  for (const r of replicas) {
    r.client.close();
    await r.server.stop(0);
    await r.proxy.stop();
    await r.pool.stopAll();
    await r.instances.stop();
  }
  await site.close();
  await db.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('calls about a browser on another replica', () => {
  let row: BrowserRow;
  let pid: number;

  before(async () => {
    const profile = (await a.client.api.createProfile({ projectId: P, name: 'routed' })).profile!;
    const created = (await a.client.api.createBrowser({ projectId: P, profileId: profile.id, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] })).browser!;
    row = (await new BrowserRepository(db.knex).byId(created.id))!;
    pid = row.pid!;
    assert.equal(row.instanceId, 'pool-a');
  });

  test('when the other replica is asked, then it answers with the owner: CDP endpoint, CDP proxy, frames, input, claim, release, profile save and stop', async () => {
    const { websocketUrl } = await b.client.api.getCdpEndpoint({ projectId: P, browserId: row.id });
    assert.equal(new URL(websocketUrl).port, String(a.cdpPort), "the endpoint is the owner's own proxy");

    // The public cdpUrl through the non-owner's proxy (one Ingress for every replica).
    const throughB = onPort(a.pool.cdpUrlFor(row), b.cdpPort);
    const cdp = await puppeteer.connect({ browserWSEndpoint: throughB, defaultViewport: null });
    const [page] = await cdp.pages();
    await page!.goto(`${site.origin}/login.html`);
    await page!.evaluate(() => fetch('/api/login', { method: 'POST', body: 'ada' }));
    assert.equal(await page!.title(), 'Log in');
    const version = await fetch(throughB.replace(/^ws/, 'http').replace('?', '/json/version?'));
    assert.equal(version.status, 200);
    assert.match(((await version.json()) as { Browser: string }).Browser, /Chrome/);

    // A picture and the tab's title travel apart: a repaint may come before the title is read, or
    // the title before the new page's first picture. So wait for both, in either order.
    const home = frames(b.client.api.streamFrames({ projectId: P, browserId: row.id, passive: false }), (seen) => seen.some((f) => f.title === 'Fixture home') && seen.some((f) => f.jpeg.length > 0));
    await b.client.api.dispatchInput({ projectId: P, browserId: row.id, tab: { navigateUrl: `${site.origin}/index.html` } });
    const seen = await home;
    assert.equal(seen.find((f) => f.title === 'Fixture home')!.url, `${site.origin}/index.html`, 'the input reached the browser and its frames came back');
    assert.ok(seen.some((f) => f.jpeg.length > 0), 'pictures came through the relay');

    assert.equal((await b.client.api.claimBrowser({ projectId: P, browserId: row.id, runId: 'run_routed' })).browser!.runId, 'run_routed');
    assert.equal((await b.client.api.releaseBrowser({ projectId: P, browserId: row.id, runId: 'run_routed' })).browser!.runId, undefined);
    const saved = (await b.client.api.saveProfileState({ projectId: P, browserId: row.id })).profile!;
    assert.deepEqual(saved.cookieDomains, ['127.0.0.1']);
    assert.deepEqual((await b.client.api.listDownloads({ projectId: P, browserId: row.id })).items, []);

    const disconnected = new Promise<void>((r) => cdp.once('disconnected', () => r()));
    const stopped = (await b.client.api.stopBrowser({ projectId: P, browserId: row.id, reason: StopReason.STOP_REASON_USER })).browser!;
    assert.equal(stopped.status, BrowserStatus.BROWSER_STATUS_STOPPED);
    assert.equal(stopped.stopReason, StopReason.STOP_REASON_USER);
    await within(disconnected, 'the CDP client disconnected by the stop');
    // The stop answers once the browser is recorded stopped; its process goes right after, then the stop is announced.
    await until(() => a.events.some((e) => e.row.id === row.id && e.kind === 'stopped'), { timeoutMs: 20_000, what: 'the stop announced' });
    assert.deepEqual(groupMembers(pid), [], "the owner's Chromium is gone");
    assert.deepEqual(a.events.filter((e) => e.row.id === row.id).map((e) => e.kind), ['started', 'stopped'], 'the owner announced the stop');
    assert.deepEqual(b.events, []);
    await assert.rejects(b.client.api.getCdpEndpoint({ projectId: P, browserId: row.id }), code(Status.FAILED_PRECONDITION));
    await assert.rejects(b.client.api.getCdpEndpoint({ projectId: 'prj_other', browserId: row.id }), code(Status.NOT_FOUND), "another project's browser stays unknown");
  });
});

describe('a forwarded call', () => {
  test('when a call marked as forwarded reaches a replica that does not run the browser, then it is answered there and never forwarded again', async () => {
    const created = (await a.client.api.createBrowser({ projectId: P, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] })).browser!;
    const ref = { projectId: P, browserId: created.id };
    await assert.rejects(b.client.api.getCdpEndpoint(ref, forwardedTo('pool-b')), code(Status.FAILED_PRECONDITION), 'answered by B as B sees it');
    await assert.rejects(b.client.api.stopBrowser({ ...ref, reason: StopReason.STOP_REASON_USER }, forwardedTo('pool-b')), code(Status.UNAVAILABLE), 'B never stops what A runs');
    await assert.rejects(b.client.api.stopBrowser({ ...ref, reason: StopReason.STOP_REASON_USER }, forwardedTo('pool-z')), code(Status.UNAVAILABLE), 'meant for another instance: refused');
    const cdpUrl = onPort(created.cdpUrl, b.cdpPort);
    assert.equal(await upgradeStatus(cdpUrl, { [FORWARDED_TO_HEADER]: 'pool-b' }), 404);
    assert.equal(await upgradeStatus(cdpUrl, { [FORWARDED_TO_HEADER]: 'pool-z' }), 503);
    assert.equal(await upgradeStatus(cdpUrl.replace(/token=[^&]+/, 'token=forged')), 401, 'a bad token is refused before anything is relayed');
    assert.equal((await a.client.api.getBrowser(ref)).browser!.status, BrowserStatus.BROWSER_STATUS_ACTIVE, 'still running');
    assert.equal(await upgradeStatus(cdpUrl), 101, 'unmarked, it is relayed');
    await b.client.api.stopBrowser({ ...ref, reason: StopReason.STOP_REASON_USER });
  });

  test("when a project at its cap needs a browser on one replica, then the other replica's idle session browser is reclaimed and its Chromium ends at once", async () => {
    const Q = 'prj_reclaim';
    const kept = (await a.client.api.createBrowser({ projectId: Q, sessionId: 'ses_kept', agent: Agent.AGENT_BROWSER_AGENT, allowedDomains: [] })).browser!;
    const keptPid = (await new BrowserRepository(db.knex).byId(kept.id))!.pid!;
    const standalone = (await a.client.api.createBrowser({ projectId: Q, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] })).browser!;
    const newer = await b.pool.create({ projectId: Q });
    assert.equal((await b.client.api.getBrowser({ projectId: Q, browserId: kept.id })).browser!.stopReason, StopReason.STOP_REASON_RECLAIMED);
    await until(() => groupMembers(keptPid).length === 0, { timeoutMs: 10_000, what: "the reclaimed browser's Chromium gone" });
    assert.deepEqual(b.events.filter((e) => e.row.id === kept.id).map((e) => e.kind), ['stopped'], 'announced once, by the replica that reclaimed it');
    assert.deepEqual(a.events.filter((e) => e.row.id === kept.id).map((e) => e.kind), ['started']);
    await b.pool.stop(Q, newer.id, 'user');
    await a.client.api.stopBrowser({ projectId: Q, browserId: standalone.id, reason: StopReason.STOP_REASON_USER });
  });

  test('when a replica drains, then its running browser goes on until stopped (up to the bound), and browsers asked of it are created on a live peer', async () => {
    const running = await b.pool.create({ projectId: P });
    assert.equal(await b.pool.drain(50), false, 'the bound passed with the browser still running');
    await b.instances.drain();
    const drained = b.pool.drain(60_000);
    const created = (await b.client.api.createBrowser({ projectId: P, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] })).browser!;
    assert.equal((await new BrowserRepository(db.knex).byId(created.id))!.instanceId, 'pool-a');
    const { websocketUrl } = await a.client.api.getCdpEndpoint({ projectId: P, browserId: running.id });
    assert.equal(new URL(websocketUrl).port, String(b.cdpPort), 'the draining replica still serves its browser');
    await a.client.api.stopBrowser({ projectId: P, browserId: running.id, reason: StopReason.STOP_REASON_USER });
    assert.equal(await drained, true, 'the drain ends when its last browser stops');
    await b.client.api.stopBrowser({ projectId: P, browserId: created.id, reason: StopReason.STOP_REASON_USER });
  });
});

describe('a dead owner', () => {
  test('when the owner is gone (its address refuses connections), then the first call about its browser reaps it before the heartbeat expires: the browser reads stopped (owner_lost), announced once', async () => {
    const created = (await a.client.api.createBrowser({ projectId: P, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] })).browser!;
    const ref = { projectId: P, browserId: created.id };
    const pid = (await new BrowserRepository(db.knex).byId(created.id))!.pid!;
    // A as a killed process looks to its peers: no gRPC, no CDP proxy, no heartbeat.
    await a.server.stop(0);
    await a.proxy.stop();

    // The clock has not moved: by its heartbeat A is alive; its refused address says otherwise.
    await assert.rejects(b.client.api.getCdpEndpoint(ref), code(Status.FAILED_PRECONDITION), 'answered here as stopped, not "try again"');
    const got = (await b.client.api.getBrowser(ref)).browser!;
    assert.equal(got.status, BrowserStatus.BROWSER_STATUS_STOPPED);
    assert.equal(got.stopReason, StopReason.STOP_REASON_OWNER_LOST);
    assert.deepEqual(await frames(b.client.api.streamFrames({ ...ref, passive: false }), () => true), [], 'a stream about it ends at once');
    assert.equal(await upgradeStatus(onPort(created.cdpUrl, b.cdpPort)), 404);
    assert.deepEqual(b.events.filter((e) => e.row.id === created.id).map((e) => [e.kind, e.row.stopReason]), [['stopped', 'owner_lost']]);
    await assert.rejects(b.client.api.createBrowser({ projectId: P, agent: Agent.AGENT_UNSPECIFIED, allowedDomains: [] }), code(Status.UNAVAILABLE), 'draining with no live peer: refused');

    now += TIMEOUT_MS + 1000;
    await b.instances.tick(); // the heartbeat timeout finds nothing more to reap
    assert.deepEqual(b.events.filter((e) => e.row.id === created.id).map((e) => e.kind), ['stopped']);

    // A was only silent: its next heartbeat finds it was reaped, so it ends what it still runs.
    await a.instances.tick();
    assert.deepEqual(groupMembers(pid), []);
    assert.deepEqual(a.events.filter((e) => e.row.id === created.id).map((e) => e.kind), ['started'], 'the stop was announced once, by the reaper');
    assert.deepEqual((await new InstanceRepository(db.knex).all()).map((i) => i.id), ['pool-a', 'pool-b'], 'A registered again');
  });
});
