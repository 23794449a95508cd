/**
 * The pool in-process with real Chromium, a real database (PGlite), the real CDP proxy on a free
 * port, a movable clock and in-memory stand-ins for the live-view and file-storage services.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import puppeteer, { type Browser as PuppeteerBrowser } from 'puppeteer-core';
import { tempDir } from '../../../test/support/infra.js';
import { until, within } from '../../../test/support/until.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { CancelledError, FailedPreconditionError, InvalidArgumentError, NotFoundError, ResourceExhaustedError, UnavailableError } from '../../common/src/errors.js';
import { createLogger } from '../../common/src/logger.js';
import { Signer } from '../../common/src/signing.js';
import type { BrowserEvents } from './browser-events.js';
import { BrowserPool, type BrowserPoolOptions } from './browser-pool.js';
import { BrowserRepository, type BrowserRow } from './browser.repository.js';
import { CdpProxy } from './cdp-proxy.js';
import { Chromium, strayTempDirs } from './chromium.js';
import { Downloads, type DownloadStore } from './downloads.js';
import { InstanceRepository } from './instance.repository.js';
import { migrations } from './migrations.js';
import { groupMembers, processesUsing } from './process-groups.js';
import { ProfileRepository } from './profile.repository.js';
import { Profiles } from './profiles.js';
import { Proxies } from './proxies.js';
import type { Frame } from './screencast.js';
import { SITE_DIR, startFixtureSite, type FixtureSite } from './testing/fixture-site.js';
import { hostConfinement } from './testing/confinement.js';
import { upgradeStatus } from './testing/upgrade-status.js';
import { defaultChromiumPath } from './config.js';

const logger = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');
let now = Date.now();
const clock = () => now;

interface Harness {
  pool: BrowserPool;
  proxy: CdpProxy;
  browsers: BrowserRepository;
  profiles: Profiles;
  profileRepo: ProfileRepository;
  events: { kind: string; row: BrowserRow }[];
  /** Resolves when `kind` has been announced for the browser (a stop answers before its process is gone; `stopped` says it is). */
  announced(id: string, kind: string): Promise<void>;
  objects: Map<string, Buffer>;
  rootDir: string;
  stop(): Promise<void>;
}

let db: Database;
let dataDir: string;
let site: FixtureSite;
const signer = new Signer('pool-test-secret-0123456789-0123456789', clock);
const harnesses: Harness[] = [];

async function harness(o: Partial<BrowserPoolOptions> & { rootDir?: string; proxyUrls?: Map<string, URL>; internalCdp?: boolean; deniedPorts?: number[] } = {}): Promise<Harness> {
  const browsers = new BrowserRepository(db.knex, db.driver);
  const profileRepo = new ProfileRepository(db.knex);
  const profiles = new Profiles({ repo: profileRepo, maxStateBytes: 1 << 20, logger, now: clock });
  const objects = new Map<string, Buffer>();
  const store: DownloadStore = {
    async put(projectId, key, _type, body) {
      const chunks: Buffer[] = [];
      for await (const c of body) chunks.push(c as Buffer);
      objects.set(`${projectId}/${key}`, Buffer.concat(chunks));
    },
    async sign(projectId, key, filename) {
      return `mem://${projectId}/${key}?name=${encodeURIComponent(filename)}`;
    },
  };
  const events: Harness['events'] = [];
  const listeners = new Set<() => void>();
  const sink: BrowserEvents = {
    publish: (kind, row) => {
      events.push({ kind, row });
      for (const l of listeners) l();
    },
  };
  const announced = (id: string, kind: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`${kind} of ${id} not announced within 20 s`));
      }, 20_000);
      function check() {
        if (!events.some((e) => e.kind === kind && e.row.id === id)) return;
        clearTimeout(timer);
        listeners.delete(check);
        resolve();
      }
      listeners.add(check);
      check();
    });
  let pool!: BrowserPool;
  const proxy = new CdpProxy({ backend: { live: (id) => pool.live(id), publicUrl: (b) => pool.publicUrl(b) }, signer, logger });
  const port = await proxy.listen('127.0.0.1', 0);
  const rootDir = o.rootDir ?? path.join(dataDir, `root-${harnesses.length}`);
  pool = new BrowserPool({
    browsers,
    profiles,
    downloads: new Downloads({ repo: browsers, store, logger, ttlSeconds: 900 }),
    liveView: { mint: async (projectId, browserId) => `http://live.test/browsers/${browserId}?project=${projectId}` },
    events: sink,
    proxies: new Proxies(o.proxyUrls ?? new Map()),
    egress: { allowPrivateNetworks: true, deniedLocalPorts: [port, ...(o.deniedPorts ?? [])] },
    signer,
    cdpWsBase: `ws://127.0.0.1:${port}`,
    cdpInternalBase: o.internalCdp ? `ws://localhost:${port}` : `ws://127.0.0.1:${port}`,
    instanceId: 'bpi_test',
    rootDir,
    chromium: { executable: defaultChromiumPath(), confinement: hostConfinement(), extraArgs: [] },
    screencast: { quality: 50, everyNthFrame: 1, maxWidth: 0, maxHeight: 0 },
    warmSize: 1,
    maxActivePerProject: 10,
    defaultTimeoutMinutes: 60,
    idleTimeoutSeconds: 0,
    reaperIntervalMs: 60000,
    defaultWidth: 1024,
    defaultHeight: 700,
    logger,
    now: clock,
    ...o,
  });
  await pool.start();
  const h: Harness = {
    pool,
    proxy,
    browsers,
    profiles,
    profileRepo,
    events,
    announced,
    objects,
    rootDir,
    async stop() {
      await proxy.stop();
      await pool.stopAll();
    },
  };
  harnesses.push(h);
  return h;
}

const chromiumUnder = (rootDir: string) => processesUsing(`--user-data-dir=${rootDir}${path.sep}`);
/** Resolves when something is made in `dir` (watched from now on). */
const firstEntry = (dir: string) =>
  new Promise<void>((resolve) => {
    const w = fs.watch(dir, () => {
      w.close();
      resolve();
    });
  });
const nonEmpty = <T>(items: T[]) => items.length > 0 && items;
const connect = (cdpUrl: string) => puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });

/** The next tab opened in `b` (by a page or a client). */
const nextTab = (b: PuppeteerBrowser) =>
  new Promise<import('puppeteer-core').Page>((resolve) => b.once('targetcreated', (t: import('puppeteer-core').Target) => void t.page().then((p) => resolve(p!))));

async function openPage(b: PuppeteerBrowser, url: string) {
  const [page] = await b.pages();
  await page!.goto(url);
  return page!;
}

const P = 'prj_pool_test';

/**
 * Holds every call of `obj[key]` until `open` is called; `started` resolves at the first one,
 * `restore` puts the method back.
 */
function holdCalls<T extends object, K extends keyof T>(obj: T, key: K) {
  const original = obj[key] as (...args: unknown[]) => Promise<unknown>;
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let started!: () => void;
  const first = new Promise<void>((r) => (started = r));
  obj[key] = (async (...args: unknown[]) => {
    started();
    await gate;
    return original.apply(obj, args);
  }) as T[K];
  return { started: first, open, restore: () => void (obj[key] = original as T[K]) };
}

before(async () => {
  dataDir = tempDir('bp-pool');
  db = await openDatabase({ service: 'browser-pool', dataDir, migrations });
  site = await startFixtureSite();
});

after(async () => {
  for (const h of harnesses) await h.stop();
  await site.close();
  await db.stop();
  const leftovers = harnesses.map((h) => ({ processes: chromiumUnder(h.rootDir), temp: strayTempDirs(h.rootDir) }));
  fs.rmSync(dataDir, { recursive: true, force: true });
  for (const l of leftovers) {
    assert.deepEqual(l.processes, [], 'no Chromium process outlives the tests');
    assert.deepEqual(l.temp, [], 'no temporary directory outlives the tests');
  }
});

describe('warm pool, CDP proxy and stop', () => {
  let h: Harness;
  before(async () => {
    h = await harness({ warmSize: 2 });
    await h.pool.whenWarm();
  });

  test('when a browser is created, then a warm one is handed out, the pool refills, and every browser has its own process group and directory', async () => {
    assert.equal(h.pool.warmCount, 2);
    const warmGroups = new Set(chromiumUnder(h.rootDir).map((p) => p.pgid));
    const a = await h.pool.create({ projectId: P });
    assert.ok(warmGroups.has(a.pid!), 'the browser is one launched before it was asked for');
    assert.equal(a.liveViewUrl, `http://live.test/browsers/${a.id}?project=${P}`);
    assert.deepEqual(h.events.filter((e) => e.row.id === a.id).map((e) => e.kind), ['started']);
    await h.pool.whenWarm();
    assert.equal(h.pool.warmCount, 2, 'refilled in the background');
    const b = await h.pool.create({ projectId: P });
    assert.notEqual(a.pid, b.pid);
    const dirs = fs.readdirSync(h.rootDir);
    assert.ok(dirs.includes(a.id) && dirs.includes(b.id));
    await h.pool.whenWarm();
    assert.equal(new Set(chromiumUnder(h.rootDir).map((p) => p.pgid)).size, 4, 'two in use plus two warm, one group each');
    await h.pool.stop(P, a.id, 'user');
    await h.pool.stop(P, b.id, 'user');
  });

  test('when several CDP clients attach through the proxy, then each drives the same browser; /json/version points back through the proxy', async () => {
    const row = await h.pool.create({ projectId: P });
    const cdpUrl = h.pool.cdpUrlFor(row);
    const clients = await Promise.all([connect(cdpUrl), connect(cdpUrl), connect(cdpUrl)]);
    const page = await openPage(clients[0]!, `${site.origin}/index.html`);
    for (const c of clients) {
      const titles = await Promise.all((await c.pages()).map((p) => p.title()));
      assert.ok(titles.includes('Fixture home'), 'every client sees the page another opened');
    }
    assert.equal(await page.evaluate(() => [innerWidth, innerHeight].join('x')), '1024x700', 'the viewport is the requested screen size');

    const base = cdpUrl.replace(/^ws/, 'http').replace('?', '/json/version?');
    const version = (await (await fetch(base)).json()) as { Browser: string; webSocketDebuggerUrl: string };
    assert.match(version.Browser, /Chrome/);
    assert.equal(version.webSocketDebuggerUrl, cdpUrl);
    const list = (await (await fetch(base.replace('/json/version', '/json/list'))).json()) as { type: string; url: string; webSocketDebuggerUrl: string }[];
    const tab = list.find((t) => t.type === 'page' && t.url.endsWith('/index.html'))!;
    assert.ok(tab.webSocketDebuggerUrl.startsWith(cdpUrl.split('?')[0] + '/devtools/page/'));
    assert.equal(await upgradeStatus(tab.webSocketDebuggerUrl), 101, 'one tab can be reached through the proxy too');
    await Promise.all(clients.map((c) => c.disconnect()));
    await h.pool.stop(P, row.id, 'user');
  });

  test('when other services reach the pool over the network, then GetCdpEndpoint hands out a signed proxy URL that drives the browser', async () => {
    const remote = await harness({ warmSize: 0, internalCdp: true });
    const row = await remote.pool.create({ projectId: P });
    const endpoint = await remote.pool.cdpEndpoint(P, row.id);
    assert.match(endpoint, /^ws:\/\/localhost:\d+\/.*token=/);
    const client = await connect(endpoint);
    const page = await openPage(client, `${site.origin}/index.html`);
    assert.equal(await page.title(), 'Fixture home');
    await client.disconnect();
    assert.equal(await upgradeStatus(endpoint.replace(/token=[^&]+/, 'token=forged')), 401);
    await remote.pool.stop(P, row.id, 'user');
  });

  test('when a token is missing, forged, for another browser or expired, then the proxy refuses it', async () => {
    const a = await h.pool.create({ projectId: P });
    const b = await h.pool.create({ projectId: P });
    const urlA = h.pool.cdpUrlFor(a);
    const urlB = h.pool.cdpUrlFor(b);
    assert.equal(await upgradeStatus(urlA), 101);
    assert.equal(await upgradeStatus(urlA.split('?')[0]!), 401, 'no token');
    // One character of the signature changed (not the last: its low bits are padding).
    const forged = urlA.replace(/(\.[A-Za-z0-9_-]{10})(.)/, (_m, head: string, c: string) => head + (c === 'A' ? 'B' : 'A'));
    assert.notEqual(forged, urlA);
    assert.equal(await upgradeStatus(forged), 401, 'forged');
    assert.equal(await upgradeStatus(`${urlA.split('?')[0]}?${urlB.split('?')[1]}`), 401, "another browser's token");
    const saved = now;
    now = Date.parse(a.timeoutAt) + 120_000;
    try {
      assert.equal(await upgradeStatus(urlA), 401, 'expired');
    } finally {
      now = saved;
    }
    await h.pool.stop(P, a.id, 'user');
    await h.pool.stop(P, b.id, 'user');
  });

  test('when a browser is stopped, then its processes and directories are gone, its cdpUrl is refused and it says so; stop again is a no-op', async () => {
    const row = await h.pool.create({ projectId: P });
    const cdpUrl = h.pool.cdpUrlFor(row);
    const client = await connect(cdpUrl);
    const disconnected = new Promise<void>((r) => client.once('disconnected', () => r()));
    const stopped = await h.pool.stop(P, row.id, 'user');
    assert.equal(stopped.status, 'stopped');
    assert.equal(stopped.stopReason, 'user');
    assert.ok(stopped.stoppedAt);
    assert.equal(h.pool.cdpUrlFor(stopped), '');
    assert.equal((await h.pool.get(P, row.id)).status, 'stopped', 'a read right after the stop says stopped');
    await h.announced(row.id, 'stopped');
    assert.deepEqual(groupMembers(row.pid!), []);
    await within(disconnected, 'the attached CDP client cut'); // the attached client is cut
    assert.equal(await upgradeStatus(cdpUrl), 404);
    await assert.rejects(connect(cdpUrl));
    assert.deepEqual(h.events.filter((e) => e.row.id === row.id).map((e) => [e.kind, e.row.stopReason]), [['started', null], ['stopped', 'user']]);
    const again = await h.pool.stop(P, row.id, 'timeout');
    assert.equal(again.stopReason, 'user', 'the first stop stands');
    assert.equal(h.events.filter((e) => e.row.id === row.id).length, 2, 'no second event');
    await assert.rejects(h.pool.stop('prj_other', row.id, 'user'), NotFoundError, "another project's browser does not exist for it");
    await assert.rejects(h.pool.cdpEndpoint(P, row.id), FailedPreconditionError);
  });

  test('when live-view cannot mint a link at create, then the browser is created without one and gets it as soon as live-view answers', async () => {
    let refusals = 2;
    const h = await harness({
      remintFirstMs: 50,
      liveView: {
        mint: async (_p, browserId) => {
          if (refusals-- > 0) throw new Error('live-view unreachable');
          return `http://live.test/browsers/${browserId}`;
        },
      },
    });
    const created = await h.pool.create({ projectId: P });
    assert.equal(created.liveViewUrl, null);
    const stored = await until(async () => (await h.browsers.get(P, created.id))?.liveViewUrl, { timeoutMs: 10000, what: 'the link minted later' });
    assert.equal(stored, `http://live.test/browsers/${created.id}`);
    assert.equal(refusals, -1, 'minted on the second try after the create, and not again');
    await h.pool.stop(P, created.id, 'user');
  });

  test('when a project is at its cap, then one more is refused with a retry hint and the warm browser stays warm', async () => {
    const capped = await harness({ warmSize: 1, maxActivePerProject: 2 });
    await capped.pool.whenWarm();
    const a = await capped.pool.create({ projectId: 'prj_cap' });
    const b = await capped.pool.create({ projectId: 'prj_cap' });
    await capped.pool.whenWarm();
    const warmBefore = capped.pool.warmCount;
    await assert.rejects(capped.pool.create({ projectId: 'prj_cap' }), (err: unknown) => {
      assert.ok(err instanceof ResourceExhaustedError);
      assert.ok(err.retryAfterSeconds! >= 1 && err.retryAfterSeconds! <= 30);
      return true;
    });
    assert.equal(capped.pool.warmCount, warmBefore);
    const other = await capped.pool.create({ projectId: 'prj_other' });
    assert.equal(other.status, 'active', 'the cap is per project');
    await capped.pool.stop('prj_cap', a.id, 'user');
    const c = await capped.pool.create({ projectId: 'prj_cap' });
    assert.equal(c.status, 'active', 'a stopped browser frees its place');
    await capped.stop();
    assert.deepEqual(chromiumUnder(capped.rootDir), []);
    for (const id of [b.id, c.id, other.id]) assert.equal((await capped.browsers.byId(id))!.stopReason, 'shutdown');
  });

  test('when a project at its cap needs a browser, then the longest idle session browser gives up its slot; one a run uses and standalone ones never do', async () => {
    const capped = await harness({ warmSize: 0, maxActivePerProject: 3 });
    const Q = 'prj_reclaim';
    const forRun = (n: number) => ({ projectId: Q, sessionId: `ses_${n}`, runId: `run_${n}`, agent: 'browser-agent' as const });
    const older = await capped.pool.create(forRun(1));
    const newer = await capped.pool.create(forRun(2));
    const standalone = await capped.pool.create({ projectId: Q });
    await assert.rejects(capped.pool.create({ projectId: Q }), ResourceExhaustedError, 'both session browsers are in use by their runs');
    await capped.pool.release(Q, older.id, 'run_1');
    now += 1000; // distinct idle-since times
    await capped.pool.release(Q, newer.id, 'run_2');

    const first = await capped.pool.create({ projectId: Q });
    assert.equal((await capped.browsers.byId(older.id))!.stopReason, 'reclaimed', 'the longest idle went first');
    assert.equal((await capped.browsers.byId(newer.id))!.status, 'active');
    assert.ok(capped.events.some((e) => e.kind === 'stopped' && e.row.id === older.id && e.row.stopReason === 'reclaimed'), 'its stop is announced with the reason');
    await assert.rejects(capped.pool.claim(Q, older.id, 'run_3'), FailedPreconditionError, 'a follow-up cannot take a reclaimed browser');

    assert.equal((await capped.pool.claim(Q, newer.id, 'run_3')).runId, 'run_3');
    await assert.rejects(capped.pool.create({ projectId: Q }), ResourceExhaustedError, 'every browser is in real use: a run, a standalone, a new one');
    await capped.pool.release(Q, newer.id, 'run_3');
    const second = await capped.pool.create({ projectId: Q });
    assert.equal((await capped.browsers.byId(newer.id))!.stopReason, 'reclaimed');
    for (const id of [standalone.id, first.id, second.id]) assert.equal((await capped.browsers.byId(id))!.status, 'active');
    await capped.stop();
    assert.deepEqual(chromiumUnder(capped.rootDir), []);
  });

  test('when the request is malformed, then it is refused before anything starts', async () => {
    await h.pool.whenWarm(); // a browser the test before stopped may still be replaced
    const groups = chromiumUnder(h.rootDir).length;
    await assert.rejects(h.pool.create({ projectId: P, screenWidth: 800 }), /given together/);
    await assert.rejects(h.pool.create({ projectId: P, screenWidth: 100, screenHeight: 600 }), /screen_width/);
    await assert.rejects(h.pool.create({ projectId: P, timeoutMinutes: 500 }), /timeout_minutes/);
    await assert.rejects(h.pool.create({ projectId: P, proxyCountryCode: 'de' }), (e: unknown) => e instanceof InvalidArgumentError && /"de"/.test(e.message));
    await assert.rejects(h.pool.create({ projectId: P, profileId: 'prf_missing' }), NotFoundError);
    assert.equal(chromiumUnder(h.rootDir).length, groups);
    assert.equal(h.pool.warmCount, 2, 'no warm browser was used up');
  });
});

interface Detection {
  checks: Record<string, boolean>;
  fingerprint: { userAgent: string; hardwareConcurrency: number; languages: string[]; locale: string; timezone: string; date: string; screen: number[]; inner: number[]; outer: number[] };
}

/** What test/fixtures/site/detect.html finds in a browser's page (and, in a new tab, what that tab finds). */
async function detect(h: Harness, row: BrowserRow, opts: { newTab?: boolean } = {}): Promise<Detection & { headers: Record<string, string> }> {
  const b = await connect(h.pool.cdpUrlFor(row));
  try {
    const page = opts.newTab ? await b.newPage() : (await b.pages())[0]!;
    const headers = JSON.parse(await (await page.goto(`${site.origin}/api/headers`))!.text()) as Record<string, string>;
    await page.goto(`${site.origin}/detect.html`);
    const d = await page.evaluate(() => (window as unknown as { detection: Promise<Detection> }).detection);
    return { ...d, headers };
  } finally {
    await b.disconnect();
  }
}

describe('what a browser tells pages (fingerprint, locale, timezone)', () => {
  let h: Harness;
  before(async () => {
    h = await harness({ warmSize: 1 });
    await h.pool.whenWarm();
  });

  test('when a browser is created, then it passes every automation check of the detection page, in its first tab and in a new one', async () => {
    const row = await h.pool.create({ projectId: P });
    assert.equal(row.stealth, true, 'stealth is the default');
    for (const newTab of [false, true]) {
      const d = await detect(h, row, { newTab });
      for (const [check, ok] of Object.entries(d.checks)) assert.equal(ok, true, `${check} passes (${newTab ? 'new tab' : 'first tab'}): ${JSON.stringify(d.fingerprint)}`);
      assert.deepEqual(d.fingerprint.inner, [1024, 700], 'the viewport is still the requested screen size');
      assert.equal(d.fingerprint.screen[0], 1024, 'the screen is as wide as screen_width (a maximized window)');
      assert.doesNotMatch(d.headers['user-agent']!, /headless/i, 'the UA header says Chrome');
      assert.doesNotMatch(d.headers['sec-ch-ua'] ?? '', /headless/i, 'the client hints header says Chrome');
    }
    await h.pool.stop(P, row.id, 'user');
  });

  test('when a browser is created with stealth false, then it shows what headless Chromium shows', async () => {
    const row = await h.pool.create({ projectId: P, stealth: false });
    assert.equal(row.stealth, false);
    const d = await detect(h, row);
    assert.equal(d.checks.webdriver, false, 'navigator.webdriver is true');
    assert.equal(d.checks.userAgent, false, 'the UA names HeadlessChrome');
    await h.pool.stop(P, row.id, 'user');
  });

  test("when two browsers are created, then their fingerprints differ; one profile's browsers present the same one each time", async () => {
    const [a, b] = [await h.pool.create({ projectId: P }), await h.pool.create({ projectId: P })];
    const [fa, fb] = [(await detect(h, a)).fingerprint, (await detect(h, b)).fingerprint];
    assert.notDeepEqual(fa, fb);
    await Promise.all([h.pool.stop(P, a.id, 'user'), h.pool.stop(P, b.id, 'user')]);
    const profile = await h.profiles.create(P, 'fp', undefined);
    const seen: Detection['fingerprint'][] = [];
    for (let i = 0; i < 2; i++) {
      const row = await h.pool.create({ projectId: P, profileId: profile.id });
      seen.push((await detect(h, row)).fingerprint);
      await h.pool.stop(P, row.id, 'user');
    }
    assert.deepEqual(seen[0], seen[1]);
  });

  test('when a browser is created with a locale and a timezone, then Intl, Date, navigator and Accept-Language agree on them', async () => {
    const row = await h.pool.create({ projectId: P, locale: 'fr-CA', timezone: 'America/Toronto' });
    assert.equal(row.locale, 'fr-CA');
    assert.equal(row.timezone, 'America/Toronto');
    const d = await detect(h, row);
    assert.equal(d.checks.languages && d.checks.timezone, true);
    assert.deepEqual(d.fingerprint.languages, ['fr-CA', 'fr']);
    assert.equal(d.fingerprint.locale, 'fr-CA');
    assert.equal(d.fingerprint.timezone, 'America/Toronto');
    assert.match(d.fingerprint.date, /^Thu Jan 15 2026 07:00:00 GMT-0500/, 'Date shows Toronto time');
    assert.equal(d.headers['accept-language'], 'fr-CA,fr;q=0.9');
    await h.pool.stop(P, row.id, 'user');
  });

  test('when a page opens a tab by a link, then the tab has the same identity from its first request (UA, locale, timezone)', async () => {
    const row = await h.pool.create({ projectId: P, locale: 'fr-CA', timezone: 'America/Toronto' });
    const b = await connect(h.pool.cdpUrlFor(row));
    try {
      const page = await openPage(b, `${site.origin}/leave.html`);
      await page.evaluate((href) => {
        const a = Object.assign(document.createElement('a'), { href, target: '_blank', id: 'same-site', textContent: 'headers' });
        document.body.append(a);
      }, `${site.origin}/api/headers`);
      const opened = nextTab(b);
      await page.click('#same-site');
      // Paused until the pool's overrides answered, a tab opened by a link hung for 30 s.
      const tab = await within(opened, 'the tab opened by the link is ready', 10_000);
      await until(async () => tab.url().endsWith('/api/headers') && (await tab.evaluate(() => document.readyState)) === 'complete', { timeoutMs: 10000, intervalMs: 50, what: 'the tab loaded' });
      const headers = JSON.parse(await tab.evaluate(() => document.body.innerText)) as Record<string, string>;
      assert.doesNotMatch(headers['user-agent']!, /headless/i, 'the tab\'s first request carries the browser\'s UA');
      assert.equal(headers['accept-language'], 'fr-CA,fr;q=0.9');
      const seen = await tab.evaluate(() => ({ ua: navigator.userAgent, language: navigator.language, timezone: Intl.DateTimeFormat().resolvedOptions().timeZone }));
      assert.deepEqual({ ...seen, ua: /headless/i.test(seen.ua) }, { ua: false, language: 'fr-CA', timezone: 'America/Toronto' });
    } finally {
      await b.disconnect();
    }
    await h.pool.stop(P, row.id, 'user');
  });

  test('when a browser has allowed domains, then its pages, new tabs and form posts reach nothing outside them; a bad pattern is refused', async () => {
    const row = await h.pool.create({ projectId: P, allowedDomains: ['127.0.0.1', '*.example.test'] });
    assert.deepEqual(row.allowedDomains, ['127.0.0.1', '*.example.test']);
    const b = await connect(h.pool.cdpUrlFor(row));
    try {
      const page = await openPage(b, `${site.origin}/leave.html`);
      assert.equal(await page.title(), 'Leave this site', 'an allowed host loads');
      const opened = nextTab(b);
      await page.click('#tab');
      const tab = await opened;
      await until(async () => (await tab.evaluate(() => document.readyState)) === 'complete' && tab.url().startsWith('http://localhost'), { timeoutMs: 10000, intervalMs: 50, what: 'the new tab tried' });
      assert.notEqual(await tab.title(), 'Fixture home', 'the new tab did not load the other site');
      assert.match(await tab.evaluate(() => document.body.innerText), /outside the domains this browser may reach/);
      await page.bringToFront();
      const [posted] = await Promise.all([page.waitForNavigation(), page.evaluate(() => (document.getElementById('post') as HTMLFormElement).submit())]);
      assert.equal(posted!.status(), 403, 'the form post was refused');
      assert.match(await page.evaluate(() => document.body.innerText), /localhost is outside the domains/);
    } finally {
      await b.disconnect();
    }
    await h.pool.stop(P, row.id, 'user');
    await assert.rejects(h.pool.create({ projectId: P, allowedDomains: ['exa mple.com'] }), (e) => e instanceof InvalidArgumentError && /allowed_domains/.test(e.message));
  });

  test('when a locale or timezone is not a real one, then the browser is refused before anything starts', async () => {
    const before = (await h.browsers.list(P, { limit: 200 })).items.length;
    await assert.rejects(h.pool.create({ projectId: P, timezone: 'Mars/Olympus' }), (e) => e instanceof InvalidArgumentError && /IANA/.test(e.message));
    await assert.rejects(h.pool.create({ projectId: P, locale: 'not a locale!' }), (e) => e instanceof InvalidArgumentError && /BCP 47/.test(e.message));
    assert.equal((await h.browsers.list(P, { limit: 200 })).items.length, before);
  });
});

describe('live view URL while live-view stalls', () => {
  test('when a browser was created without a live view URL and live-view stalls, then a read answers without it at once, and a read after live-view answers has it', async () => {
    let release!: () => void;
    const stalled = new Promise<void>((r) => (release = r));
    let calls = 0;
    const h = await harness({
      warmSize: 0,
      readMintWaitMs: 100,
      liveView: {
        async mint(projectId, browserId) {
          if (++calls === 1) throw new Error('live-view unreachable'); // at create
          await stalled; // every later mint hangs until released, like live-view under a burst (issue 25)
          return `http://live.test/browsers/${browserId}?project=${projectId}`;
        },
      },
    });
    const row = await h.pool.create({ projectId: P });
    assert.equal(row.liveViewUrl, null, 'created while live-view was down');
    assert.equal((await h.pool.get(P, row.id)).liveViewUrl, null, 'the read did not wait for the stalled live-view');
    assert.equal((await h.pool.list(P, { limit: 10, cursor: '' })).items.find((b) => b.id === row.id)!.liveViewUrl, null, 'nor did the list');
    assert.equal(calls, 2, 'one mint in flight for the browser, however many reads ask');
    release();
    const url = `http://live.test/browsers/${row.id}?project=${P}`;
    await until(async () => (await h.pool.get(P, row.id)).liveViewUrl === url, { timeoutMs: 5000, intervalMs: 20, what: 'the live view URL stored' });
    assert.equal((await h.browsers.byId(row.id))!.liveViewUrl, url, 'stored for every later read');
    await h.pool.stop(P, row.id, 'user');
    await h.stop();
  });
});

describe('ads and trackers (block_ads)', () => {
  let h: Harness;
  // The fixture site under a news site's name and under two hosts of the lists (ads.html loads a pixel from each).
  const NAMES = new Set(['news.example.org', 'ad.doubleclick.net', 'www.googletagmanager.com']);
  before(async () => {
    h = await harness({ warmSize: 0, egressLookup: async (name) => (NAMES.has(name) ? [{ address: '127.0.0.1', family: 4 }] : []) });
    await h.pool.adBlocker(); // EasyList and EasyPrivacy parsed once, before the tests' clocks
  });

  /** Opens ads.html in the browser: which pixels loaded, what a reader sees, what reached the site. */
  async function visit(row: BrowserRow, hidden: boolean) {
    const b = await connect(h.pool.cdpUrlFor(row));
    try {
      const page = (await b.pages())[0]!;
      const from = site.requests.length;
      await page.goto(`http://news.example.org:${new URL(site.origin).port}/ads.html`);
      const loaded = await page.evaluate(() => (window as unknown as { loaded: Promise<Record<string, boolean>> }).loaded);
      if (hidden) {
        // The pool hides at DOMContentLoaded, beside the page: awaited by what a reader sees.
        await until(async () => !(await page.evaluate(() => document.body.innerText)).includes('advertisement'), { timeoutMs: 10000, intervalMs: 50, what: 'the ad slot hidden' });
      }
      const text = await page.evaluate(() => document.body.innerText);
      const display = await page.evaluate(() => ['ad_banner', 'article'].map((id) => getComputedStyle(document.getElementById(id)!).display));
      const hosts = site.requests.slice(from).map((r) => r.split(':')[0]!);
      return { loaded, text, display, hosts };
    } finally {
      await b.disconnect();
    }
  }

  test('when a browser blocks ads, then the ad and tracker requests never leave it and the lists hide the ad slots; without, they load and show', async () => {
    const blocking = await h.pool.create({ projectId: P, blockAds: true });
    assert.equal(blocking.blockAds, true);
    const on = await visit(blocking, true);
    assert.deepEqual(on.loaded, { own: true, ad: false, tracker: false });
    assert.deepEqual([...new Set(on.hosts)].sort(), ['news.example.org'], 'only the news site was reached');
    assert.match(on.text, /The council approved the new bridge/);
    assert.doesNotMatch(on.text, /advertisement/, 'hidden by a rule matched on the ids of the document (###ad_banner)');
    assert.doesNotMatch(on.text, /Sponsored slot/, 'hidden by a generic rule (##AD-SLOT)');
    assert.deepEqual(on.display, ['none', 'block']);
    await h.pool.stop(P, blocking.id, 'user');

    const plain = await h.pool.create({ projectId: P });
    assert.equal(plain.blockAds, false, 'a standalone browser does not block unless asked');
    const off = await visit(plain, false);
    assert.deepEqual(off.loaded, { own: true, ad: true, tracker: true });
    assert.deepEqual([...new Set(off.hosts)].sort(), ['ad.doubleclick.net', 'news.example.org', 'www.googletagmanager.com']);
    assert.match(off.text, /advertisement/);
    assert.match(off.text, /Sponsored slot/);
    await h.pool.stop(P, plain.id, 'user');
  });

  test('when the filter lists cannot be read, then a browser that blocks ads is refused and nothing is recorded; others start', async () => {
    const broken = await harness({ warmSize: 0, adblockLists: [path.join(dataDir, 'no-such-list.txt')] });
    const before = (await broken.browsers.list(P, { limit: 200 })).items.length;
    await assert.rejects(broken.pool.create({ projectId: P, blockAds: true }), (e) => e instanceof UnavailableError && /Ad blocking is not available/.test(e.message));
    assert.equal((await broken.browsers.list(P, { limit: 200 })).items.length, before);
    const row = await broken.pool.create({ projectId: P });
    await broken.pool.stop(P, row.id, 'user');
    await broken.stop();
  });
});

describe('shutdown', () => {
  test('when the pool stops while warm browsers are still launching, then none of them survives', async () => {
    const rootDir = path.join(dataDir, 'root-launching');
    fs.mkdirSync(rootDir, { recursive: true });
    const launching = firstEntry(rootDir); // a launch begins with the browser's folder
    const h = await harness({ warmSize: 2, rootDir });
    await launching;
    assert.equal(h.pool.warmCount, 0, 'no warm browser is ready yet');
    await h.stop();
    assert.deepEqual(chromiumUnder(h.rootDir), []);
    assert.deepEqual(fs.readdirSync(h.rootDir), []);
    assert.deepEqual(strayTempDirs(h.rootDir), []);
  });

  test('when the pool stops, then every active browser is stopped with its profile saved', async () => {
    const h = await harness({ warmSize: 1 });
    const profile = await h.profiles.create(P, 'shutdown', undefined);
    const a = await h.pool.create({ projectId: P, profileId: profile.id });
    const b = await h.pool.create({ projectId: P });
    const client = await connect(h.pool.cdpUrlFor(a));
    const page = await openPage(client, `${site.origin}/index.html`);
    await page.evaluate(() => localStorage.setItem('theme', 'dark'));
    await h.stop();
    for (const r of [a, b]) assert.equal((await h.browsers.byId(r.id))!.stopReason, 'shutdown');
    assert.deepEqual((await h.profileRepo.state(P, profile.id))!.origins, [{ origin: site.origin, localStorage: [['theme', 'dark']] }]);
    assert.deepEqual(chromiumUnder(h.rootDir), []);
    assert.deepEqual(fs.readdirSync(h.rootDir), []);
    await assert.rejects(h.pool.create({ projectId: P }), /shutting down/);
  });
});

describe("reuse of a stopped browser's Chromium", () => {
  const login = async (page: import('puppeteer-core').Page) => {
    await page.goto(`${site.origin}/login.html`);
    await page.type('#user', 'tim');
    await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
  };

  test("when a project's browser is stopped, then its next one runs in the same Chromium with nothing of the first (cookies, storage, tabs, downloads, its CDP URL); another project's never gets it", async () => {
    const h = await harness({ warmSize: 0, reuseIdleMs: 30_000 });
    const first = await h.pool.create({ projectId: P });
    const b1 = await connect(h.pool.cdpUrlFor(first));
    await login((await b1.pages())[0]!);
    const tab = await b1.newPage();
    await tab.goto(`${site.origin}/download.html`);
    await tab.click('#report');
    await until(async () => nonEmpty(await h.pool.downloads(P, first.id)), { intervalMs: 50, what: 'the download' });
    await b1.disconnect();
    await h.pool.stop(P, first.id, 'user');
    await h.announced(first.id, 'stopped');

    const second = await h.pool.create({ projectId: P });
    assert.notEqual(second.id, first.id);
    assert.equal(second.pid, first.pid, 'the same Chromium');
    assert.equal(await upgradeStatus(h.pool.cdpUrlFor(first)), 404, "the first browser's CDP URL opens nothing");
    const b2 = await connect(h.pool.cdpUrlFor(second));
    const pages = await b2.pages();
    assert.deepEqual(pages.map((p) => p.url()), ['about:blank'], 'one blank tab');
    assert.equal((await b2.browserContexts()).length, 1, 'one context, the default one, as in a browser of its own');
    assert.deepEqual(await b2.cookies(), []);
    assert.deepEqual(await h.pool.downloads(P, second.id), []);
    const me = async (page: import('puppeteer-core').Page) => (await page.goto(`${site.origin}/api/me`))!.text();
    assert.equal(await me(pages[0]!), 'nobody');
    await pages[0]!.goto(`${site.origin}/login.html`);
    assert.deepEqual(await pages[0]!.evaluate(() => [localStorage.length, history.length]), [0, 3]);
    // Pages a client opens are in the session's context: they share its cookies.
    await login(pages[0]!);
    const opened = await b2.newPage();
    assert.equal(await me(opened), 'tim');
    assert.deepEqual((await b2.cookies()).map((c) => c.name), ['session']);
    await b2.disconnect();
    const pw = await chromium.connectOverCDP(h.pool.cdpUrlFor(second));
    assert.deepEqual(pw.contexts().map((c) => c.pages().length), [2], "Playwright sees the session's tabs in its default context");
    assert.deepEqual((await pw.contexts()[0]!.cookies()).map((c) => c.name), ['session']);
    await pw.close();
    await h.pool.stop(P, second.id, 'user');
    await h.announced(second.id, 'stopped');

    const other = await h.pool.create({ projectId: 'prj_other' });
    assert.notEqual(other.pid, first.pid, "another project's browser is never given it");
    const third = await h.pool.create({ projectId: P });
    assert.equal(third.pid, first.pid);
    for (const [project, row] of [['prj_other', other], [P, third]] as const) await h.pool.stop(project, row.id, 'user');
    // Its stops are done (their Chromiums kept or ended) before the next test's pool looks at what is running.
    await Promise.all([other, third].map((row) => h.announced(row.id, 'stopped')));
  });

  test('when a create comes while a stop of the project is still preparing its Chromium, then it waits for that one instead of launching', async () => {
    const h = await harness({ warmSize: 0, reuseIdleMs: 30_000 });
    const first = await h.pool.create({ projectId: P });
    await h.pool.stop(P, first.id, 'user');
    const next = await h.pool.create({ projectId: P });
    assert.equal(next.pid, first.pid, 'the stopped browser\'s Chromium, not a new launch');
    await h.pool.stop(P, next.id, 'user');
    await h.announced(next.id, 'stopped');
  });

  test('when a warm browser is ready and a stop of the project is still preparing its Chromium, then a create takes that one and the warm one stays warm', async () => {
    const h = await harness({ warmSize: 1, reuseIdleMs: 30_000 });
    const first = await h.pool.create({ projectId: P });
    await h.pool.whenWarm();
    const groups = () => new Set(chromiumUnder(h.rootDir).map((p) => p.pgid));
    const warmGroup = [...groups()].find((g) => g !== first.pid);
    assert.ok(warmGroup, 'a warm Chromium beside the first');
    await h.pool.stop(P, first.id, 'user');
    const next = await h.pool.create({ projectId: P });
    assert.equal(next.pid, first.pid, "the stopped browser's Chromium");
    assert.equal(h.pool.warmCount, 1, 'the warm one is still there');
    assert.deepEqual([...groups()].sort(), [first.pid, warmGroup].sort(), 'the same warm one, and no launch to replace it');
    await h.pool.stop(P, next.id, 'user');
    await h.announced(next.id, 'stopped');
  });

  test('when a kept Chromium cannot be prepared for the next browser, then that one is launched instead and the create succeeds', async () => {
    const h = await harness({ warmSize: 0, reuseIdleMs: 30_000, profileTimeoutMs: 1500 });
    const first = await h.pool.create({ projectId: P });
    await h.pool.stop(P, first.id, 'user');
    await h.announced(first.id, 'stopped');
    // Kept, then frozen: it answers nothing.
    for (const pid of groupMembers(first.pid!)) process.kill(pid, 'SIGSTOP');
    const next = await h.pool.create({ projectId: P });
    assert.notEqual(next.pid, first.pid, 'a Chromium of its own');
    assert.equal((await h.browsers.byId(next.id))!.status, 'active');
    const b = await connect(h.pool.cdpUrlFor(next));
    assert.equal(await (await b.pages())[0]!.evaluate(() => 1 + 1), 2, 'it works');
    await b.disconnect();
    await until(() => groupMembers(first.pid!).length === 0, { timeoutMs: 10_000, what: 'the frozen one ended' });
    await h.pool.stop(P, next.id, 'user');
    await h.announced(next.id, 'stopped');
  });

  test('when nobody asks for a kept Chromium, then it ends once its time is up; a launch that needs its slot ends it at once', async () => {
    const h = await harness({ warmSize: 0, reuseIdleMs: 500 });
    const row = await h.pool.create({ projectId: P });
    await h.pool.stop(P, row.id, 'user');
    await h.announced(row.id, 'stopped');
    await until(() => chromiumUnder(h.rootDir).length === 0 && fs.readdirSync(h.rootDir).length === 0, { what: 'the kept Chromium ended and its folder gone' });

    const full = await harness({ warmSize: 0, reuseIdleMs: 60_000, maxBrowsers: 1 });
    const a = await full.pool.create({ projectId: P });
    await full.pool.stop(P, a.id, 'user');
    await full.announced(a.id, 'stopped');
    const b = await full.pool.create({ projectId: 'prj_other' });
    assert.notEqual(b.pid, a.pid);
    assert.deepEqual(groupMembers(a.pid!), [], 'the kept one made way');
    await full.pool.stop('prj_other', b.id, 'user');
    await full.announced(b.id, 'stopped');
  });
});

describe('timeouts and idleness', () => {
  test('when a browser passes its timeout, then the reaper stops it the way stop does, saving its profile', async () => {
    const h = await harness({ warmSize: 0 });
    const profile = await h.profiles.create(P, 'timeout', undefined);
    const row = await h.pool.create({ projectId: P, profileId: profile.id, timeoutMinutes: 1 });
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/login.html`);
    await page.type('#user', 'tim');
    await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
    await b.disconnect();
    now += 30_000;
    await h.pool.reap();
    assert.equal((await h.browsers.byId(row.id))!.status, 'active', 'not yet');
    now += 31_000;
    try {
      await h.pool.reap();
    } finally {
      now -= 61_000;
    }
    const stopped = (await h.browsers.byId(row.id))!;
    assert.equal(stopped.status, 'stopped');
    assert.equal(stopped.stopReason, 'timeout');
    assert.deepEqual(groupMembers(row.pid!), []);
    const state = (await h.profileRepo.state(P, profile.id))!;
    assert.deepEqual(state.cookies.map((c) => [c.name, c.value]), [['session', 'tim']]);
    assert.deepEqual(state.origins, [{ origin: site.origin, localStorage: [['user', 'tim']] }]);
    assert.deepEqual((await h.profiles.get(P, profile.id)).cookieDomains, ['127.0.0.1']);
    assert.deepEqual(h.events.map((e) => [e.kind, e.row.stopReason]), [['started', null], ['stopped', 'timeout']]);
  });

  test('when nobody uses a browser for the idle timeout, then it is stopped; a connected client or a run keeps it', async () => {
    const h = await harness({ warmSize: 0, idleTimeoutSeconds: 30 });
    const idle = await h.pool.create({ projectId: P });
    const held = await h.pool.create({ projectId: P });
    const forRun = await h.pool.create({ projectId: P, sessionId: 'ses_1', runId: 'run_1', agent: 'browser-agent' });
    const client = await connect(h.pool.cdpUrlFor(held));
    now += 31_000;
    try {
      await h.pool.reap();
    } finally {
      now -= 31_000;
    }
    assert.equal((await h.browsers.byId(idle.id))!.stopReason, 'idle');
    assert.equal((await h.browsers.byId(held.id))!.status, 'active', 'a CDP client is attached');
    assert.equal((await h.browsers.byId(forRun.id))!.status, 'active', 'a run holds it');
    await client.disconnect();
    await h.pool.release(P, forRun.id, 'run_1');
    await until(() => h.pool.live(held.id)!.clientCount === 0, { intervalMs: 10, what: 'the proxy seeing the socket close' });
    now += 31_000;
    try {
      await h.pool.reap();
    } finally {
      now -= 31_000;
    }
    assert.equal((await h.browsers.byId(held.id))!.stopReason, 'idle');
    assert.equal((await h.browsers.byId(forRun.id))!.stopReason, 'idle');
    assert.deepEqual(chromiumUnder(h.rootDir), []);
  });

  test('when only a recorder streams frames, then the browser is still stopped as idle; a viewer keeps it', async () => {
    const h = await harness({ warmSize: 0, idleTimeoutSeconds: 30 });
    const recorded = await h.pool.create({ projectId: P });
    const watched = await h.pool.create({ projectId: P });
    const stopStreams = new AbortController();
    const until = new Promise<void>((resolve) => stopStreams.signal.addEventListener('abort', () => resolve()));
    const framesOf = { recorded: 0, watched: 0 };
    const streams = [
      h.pool.streamFrames(P, recorded.id, () => void framesOf.recorded++, until, { passive: true }),
      h.pool.streamFrames(P, watched.id, () => void framesOf.watched++, until),
      h.pool.streamFrames(P, watched.id, () => {}, until, { passive: true }),
    ];
    assert.ok(framesOf.recorded > 0 && framesOf.watched > 0, 'both streams are subscribed');
    now += 31_000;
    try {
      await h.pool.reap();
    } finally {
      now -= 31_000;
    }
    assert.equal((await h.browsers.byId(recorded.id))!.stopReason, 'idle', 'a recorder is not use');
    assert.equal((await h.browsers.byId(watched.id))!.status, 'active', 'a viewer is use');
    await streams[0]; // the recorder's stream ends with its browser
    stopStreams.abort();
    await Promise.all(streams);
  });

  test('when a recorded browser is stopped while its page keeps changing, then its recorder heard every second that it lived and got nothing stamped after the stop', async () => {
    const h = await harness({ warmSize: 0 });
    // A profile to save makes the stop take a while after it is recorded, the page still painting.
    const profile = await h.profiles.create(P, 'recorded-stop', 'user-9');
    const row = await h.pool.create({ projectId: P, profileId: profile.id });
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/index.html`);
    await page.evaluate(`(function paint() {
      document.body.style.background = 'hsl(' + (Math.floor(performance.now() / 10) % 360) + ' 80% 50%)';
      requestAnimationFrame(paint);
    })()`);
    const seen: Frame[] = [];
    const streamed = h.pool.streamFrames(P, row.id, (f) => seen.push(f), new Promise(() => {}), { passive: true });
    const subscribedMs = Date.now();
    await until(() => seen.some((f) => !f.jpeg.length && f.timestampMs >= subscribedMs + 1500), { what: 'a message with no picture saying the browser lives, a second and more on' });
    await b.disconnect();
    const saved = now;
    now = Date.now(); // the pool's clock (frozen in these tests) is the frames' one for this stop
    const stopped = await h.pool.stop(P, row.id, 'user').finally(() => (now = saved));
    await streamed;
    const stopMs = Date.parse(stopped.stoppedAt!);
    assert.ok(seen.filter((f) => f.jpeg.length && f.timestampMs <= stopMs).length >= 5, 'the changing page was streamed up to the stop');
    assert.deepEqual(seen.filter((f) => f.timestampMs > stopMs).map((f) => `${f.jpeg.length ? 'frame' : 'message'} ${f.timestampMs - stopMs} ms after the stop`), [], 'nothing stamped after the stop');
  });
});

describe('profiles, release and saves', () => {
  test('when a run releases its browser, then its run id is cleared only if it matches, the profile is saved and the browser stays', async () => {
    const h = await harness({ warmSize: 0 });
    const profile = await h.profiles.create(P, 'release', 'user-7');
    const row = await h.pool.create({ projectId: P, profileId: profile.id, sessionId: 'ses_r', runId: 'run_r', agent: 'browsercode' });
    assert.ok((await h.profiles.get(P, profile.id)).lastUsedAt, 'marked used when the browser started');
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/login.html`);
    await page.type('#user', 'rae');
    await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
    assert.equal((await h.pool.release(P, row.id, 'run_other')).runId, 'run_r');
    const released = await h.pool.release(P, row.id, 'run_r');
    assert.equal(released.runId, null);
    assert.equal(released.status, 'active');
    assert.equal((await h.pool.get(P, row.id)).runId, null);
    assert.deepEqual((await h.profiles.get(P, profile.id)).cookieDomains, ['127.0.0.1']);
    assert.equal(await page.evaluate(() => localStorage.getItem('user')), 'rae', 'the browser is still usable');
    await b.disconnect();
    await h.pool.stop(P, row.id, 'user');
  });

  test('when a save is cut off by the browser dying, then the profile keeps its previous state whole', async () => {
    const h = await harness({ warmSize: 0 });
    const profile = await h.profiles.create(P, 'atomic', undefined);
    const row = await h.pool.create({ projectId: P, profileId: profile.id });
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/login.html`);
    await page.type('#user', 'first');
    await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
    const saved = await h.pool.saveProfileState(P, row.id);
    assert.deepEqual(saved!.cookieDomains, ['127.0.0.1']);
    const before = await h.profileRepo.state(P, profile.id);
    await page.evaluate(() => localStorage.setItem('user', 'second'));
    const saving = h.pool.saveProfileState(P, row.id);
    assert.ok(row.pid && row.pid > 1);
    process.kill(-row.pid, 'SIGKILL');
    await assert.rejects(saving);
    assert.deepEqual(await h.profileRepo.state(P, profile.id), before);
    await b.disconnect().catch(() => {});
    await h.pool.stop(P, row.id, 'user');
    assert.equal((await h.browsers.byId(row.id))!.status, 'stopped');
  });

  test('when a browser without a profile is asked to save, then nothing is saved', async () => {
    const h = await harness({ warmSize: 0 });
    const row = await h.pool.create({ projectId: P });
    assert.equal(await h.pool.saveProfileState(P, row.id), undefined);
    await h.pool.stop(P, row.id, 'user');
  });
});

describe('stops that answer before the browser is gone', () => {
  const BG = 'prj_pool_background_stop';
  /** Holds every profile save of `h` until `open` is called; `started` resolves at the first one. */
  const gateSaves = (h: Harness) => holdCalls(h.profiles, 'save');

  /** A browser of a new profile, logged in as `user` and stopped: its save is held (`saves.open()` lets it finish) and has begun. */
  async function stopWhileSaving(h: Harness, name: string, user: string) {
    const profile = await h.profiles.create(BG, name, undefined);
    const first = await h.pool.create({ projectId: BG, profileId: profile.id });
    await logIn(h, first, user);
    const saves = gateSaves(h);
    await h.pool.stop(BG, first.id, 'user');
    await saves.started;
    return { profile, first, saves };
  }

  async function logIn(h: Harness, row: BrowserRow, user: string) {
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/login.html`);
    await page.type('#user', user);
    await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
    await b.disconnect();
  }

  test('when a profile browser is stopped, then the stop answers while its profile is still being captured, and the node slot it holds is not reused until its process is gone', async () => {
    const h = await harness({ warmSize: 0, maxBrowsers: 1 });
    const profile = await h.profiles.create(BG, 'slow-save', undefined);
    const first = await h.pool.create({ projectId: BG, profileId: profile.id });
    await logIn(h, first, 'sam');
    const saves = gateSaves(h);
    const stopped = await h.pool.stop(BG, first.id, 'user');
    assert.equal(stopped.status, 'stopped');
    assert.equal((await h.pool.get(BG, first.id)).status, 'stopped', 'a read right after says stopped');
    await saves.started;
    assert.notDeepEqual(groupMembers(first.pid!), [], 'its process is still there: the capture needs it');
    const next = h.pool.create({ projectId: BG }).then((row) => ({ row, oldGroup: groupMembers(first.pid!), announced: h.events.map((e) => `${e.kind} ${e.row.id}`) }));
    const waiting = await until(async () => (await h.browsers.list(BG, { status: 'active', limit: 10 })).items.find((r) => r.id !== first.id), { what: 'the next browser recorded' });
    assert.equal(new Set(chromiumUnder(h.rootDir).map((p) => p.pgid)).size, 1, 'no second Chromium while the node is full');
    saves.open();
    const { row, oldGroup, announced } = await next;
    assert.equal(row.id, waiting.id);
    assert.deepEqual(oldGroup, [], 'launched only once the stopped one had exited');
    assert.ok(announced.indexOf(`stopped ${first.id}`) !== -1, 'the stop was announced before the next browser started');
    assert.deepEqual((await h.profiles.get(BG, profile.id)).cookieDomains, ['127.0.0.1'], 'the stop saved the profile');
    await h.pool.stop(BG, row.id, 'user');
  });

  test('when a browser is created with a profile whose stop is still saving it, then it waits for that save and starts logged in', async () => {
    const h = await harness({ warmSize: 0 });
    const { profile, saves } = await stopWhileSaving(h, 'handover', 'hana');
    assert.deepEqual((await h.profiles.get(BG, profile.id)).cookieDomains, [], 'nothing saved yet');
    const second = h.pool.create({ projectId: BG, profileId: profile.id });
    saves.open();
    const row = await second;
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/login.html`);
    assert.equal(await page.evaluate(() => localStorage.getItem('user')), 'hana', 'the state the stop captured');
    assert.ok((await page.cookies()).some((c) => c.name === 'session' && c.value === 'hana'));
    await b.disconnect();
    await h.pool.stop(BG, row.id, 'user');
  });

  test('when a profile browser is stopped on one pool replica, then a create naming the profile on another waits for that save and starts logged in; a save of a replica that is gone holds nothing', async () => {
    const a = await harness({ warmSize: 0, instanceId: 'bpi_save_a' });
    const b = await harness({ warmSize: 0, instanceId: 'bpi_save_b' });
    const instances = new InstanceRepository(db.knex);
    await instances.register({ id: 'bpi_save_a', grpcAddr: '127.0.0.1:1', cdpUrl: 'ws://127.0.0.1:1' }, new Date(now));
    const { profile, saves } = await stopWhileSaving(a, 'across replicas', 'ines');
    const savingElsewhere = b.profiles.savingElsewhere.bind(b.profiles);
    const waits = new Promise<string>((resolve) => {
      b.profiles.savingElsewhere = async (...args) => {
        const saving = await savingElsewhere(...args);
        if (saving) resolve('waits for the save');
        return saving;
      };
    });
    // What GetProfile does on the other replica before it reads, and a create there.
    const read = b.pool.profileSaved(BG, profile.id).then(() => b.profiles.get(BG, profile.id));
    const second = b.pool.create({ projectId: BG, profileId: profile.id });
    const seen = await Promise.race([waits, read.then(() => 'read'), second.then(() => 'created')]);
    assert.equal(seen, 'waits for the save', 'the other replica neither reads nor starts the browser before the save');
    saves.open();
    const row = await second;
    assert.deepEqual((await read).cookieDomains, ['127.0.0.1'], 'a read on the other replica shows the save');
    const cdp = await connect(b.pool.cdpUrlFor(row));
    const page = await openPage(cdp, `${site.origin}/login.html`);
    assert.ok((await page.cookies()).some((c) => c.name === 'session' && c.value === 'ines'), 'the new browser starts logged in');
    await cdp.disconnect();
    await b.pool.stop(BG, row.id, 'user');

    await a.profileRepo.markSaving(BG, profile.id, 'bpi_gone', new Date(now));
    await within(b.pool.profileSaved(BG, profile.id), 'a read not held by the save of a replica with no row', 3000);
    await instances.deregister('bpi_save_a');
  });
});

describe('a create its caller gave up on', () => {
  const GU = 'prj_pool_gave_up';
  const active = async (h: Harness) => (await h.browsers.list(GU, { status: 'active', limit: 10 })).items.map((r) => r.id);
  const cancelled = (err: unknown) => err instanceof CancelledError;

  test('when the caller gives up while its create waits for a node slot, then the create ends, leaving no record and launching nothing', async () => {
    const h = await harness({ warmSize: 0, maxBrowsers: 1 });
    const first = await h.pool.create({ projectId: GU });
    const ac = new AbortController();
    const second = h.pool.create({ projectId: GU, signal: ac.signal });
    const waiting = await until(async () => (await active(h)).find((id) => id !== first.id), { what: 'the waiting create recorded' });
    ac.abort();
    await assert.rejects(second, cancelled);
    assert.deepEqual(await active(h), [first.id], 'only the first browser is active');
    assert.equal((await h.browsers.byId(waiting)) ?? undefined, undefined, 'the abandoned record is gone');
    assert.equal(new Set(chromiumUnder(h.rootDir).map((p) => p.pgid)).size, 1, 'no second Chromium');
    await h.pool.stop(GU, first.id, 'user');
  });

  test('when the caller gives up while its browser is being prepared, then that browser is ended and its record removed, and its slot is free again', async () => {
    const h = await harness({ warmSize: 0, maxBrowsers: 1 });
    const profile = await h.profiles.create(GU, 'gave-up', undefined);
    const markUsed = holdCalls(h.profiles, 'markUsed');
    const ac = new AbortController();
    const create = h.pool.create({ projectId: GU, profileId: profile.id, signal: ac.signal });
    await markUsed.started;
    const [id] = await active(h);
    const pgids = new Set(chromiumUnder(h.rootDir).map((p) => p.pgid));
    assert.equal(pgids.size, 1, 'its Chromium runs');
    ac.abort();
    markUsed.open();
    await assert.rejects(create, cancelled);
    assert.deepEqual(await active(h), [], 'no active browser');
    assert.equal((await h.browsers.byId(id!)) ?? undefined, undefined, 'no record');
    assert.deepEqual(h.events.filter((e) => e.row.id === id), [], 'never announced as started');
    markUsed.restore();
    const next = await h.pool.create({ projectId: GU });
    assert.deepEqual(groupMembers([...pgids][0]!), [], 'the abandoned Chromium is gone before the next takes its slot');
    await h.pool.stop(GU, next.id, 'user');
  });
});

describe('frames, input and downloads', () => {
  test('when two viewers watch, then both get the same JPEG frames of the active tab with their timestamps, and input reaches the page', async () => {
    const h = await harness({ warmSize: 0 });
    const row = await h.pool.create({ projectId: P });
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/index.html`);
    const seen: [Frame[], Frame[]] = [[], []];
    let leave!: () => void;
    const secondLeaves = new Promise<void>((r) => (leave = r));
    const waitFor = (i: 0 | 1, pred: (f: Frame) => boolean) =>
      new Promise<Frame>((resolve) => {
        const check = () => {
          const f = seen[i].find(pred);
          if (f) resolve(f);
          else setTimeout(check, 20);
        };
        check();
      });
    const streams = [0, 1].map((i) => h.pool.streamFrames(P, row.id, (f) => seen[i as 0 | 1].push(f), i === 1 ? secondLeaves : new Promise(() => {})));
    const first = await Promise.all([waitFor(0, (f) => f.jpeg.length > 0), waitFor(1, (f) => f.jpeg.length > 0)]);
    for (const f of first) {
      assert.deepEqual([...f.jpeg.subarray(0, 2)], [0xff, 0xd8], 'a JPEG');
      assert.equal(f.width, 1024);
      assert.equal(f.url, `${site.origin}/index.html`);
      assert.ok(Math.abs(f.timestampMs - Date.now()) < 60_000, 'the frame time is passed on in ms since the epoch');
    }

    for (const ch of 'hi') {
      await h.pool.input(P, row.id, { kind: 'key', type: 'keyDown', key: ch, code: `Key${ch.toUpperCase()}`, text: ch, modifiers: 0 });
      await h.pool.input(P, row.id, { kind: 'key', type: 'keyUp', key: ch, code: `Key${ch.toUpperCase()}`, text: '', modifiers: 0 });
    }
    await page.waitForFunction(() => document.getElementById('typed')!.textContent === 'hi');
    const box = (await page.$eval('#q', (el) => JSON.stringify(el.getBoundingClientRect().toJSON()))) as string;
    const r = JSON.parse(box) as { x: number; y: number };
    await page.evaluate(() => ((document.getElementById('q') as HTMLInputElement).value = ''));
    await h.pool.input(P, row.id, { kind: 'mouse', type: 'mousePressed', x: r.x + 5, y: r.y + 5, button: 'left', clickCount: 1, modifiers: 0 });
    await h.pool.input(P, row.id, { kind: 'mouse', type: 'mouseReleased', x: r.x + 5, y: r.y + 5, button: 'left', clickCount: 1, modifiers: 0 });
    await h.pool.input(P, row.id, { kind: 'key', type: 'char', key: 'z', code: 'KeyZ', text: 'z', modifiers: 0 });
    await page.waitForFunction(() => (document.getElementById('q') as HTMLInputElement).value === 'z');

    await h.pool.input(P, row.id, { kind: 'wheel', x: 200, y: 200, deltaX: 0, deltaY: 600 });
    await page.waitForFunction(() => scrollY > 0);

    await h.pool.input(P, row.id, { kind: 'tab', action: 'navigate', value: `${site.origin}/download.html` });
    await page.waitForFunction(() => document.title === 'Downloads');
    await h.pool.input(P, row.id, { kind: 'tab', action: 'back', value: '' });
    await page.waitForFunction(() => document.title === 'Fixture home');
    await h.pool.input(P, row.id, { kind: 'tab', action: 'forward', value: '' });
    await page.waitForFunction(() => document.title === 'Downloads');
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
    await h.pool.input(P, row.id, { kind: 'tab', action: 'reload', value: '' });
    await page.waitForFunction(() => document.title === 'Downloads' && !(window as unknown as { marker?: number }).marker);

    await h.pool.input(P, row.id, { kind: 'tab', action: 'newTab', value: `${site.origin}/login.html` });
    const moved = await waitFor(0, (f) => f.jpeg.length > 0 && f.url.endsWith('/login.html'));
    assert.equal(moved.tabs.length, 2);
    assert.deepEqual(moved.tabs.filter((t) => t.active).map((t) => t.url), [`${site.origin}/login.html`], 'the screencast follows the new active tab');
    await waitFor(1, (f) => f.url.endsWith('/login.html'));
    leave();
    await streams[1]; // one viewer leaving ends its stream only
    assert.equal(h.pool.live(row.id)!.screencast.subscriberCount, 1);
    await assert.rejects(h.pool.input(P, row.id, { kind: 'tab', action: 'navigate', value: 'file:///etc/passwd' }), InvalidArgumentError);
    await assert.rejects(h.pool.input(P, row.id, { kind: 'tab', action: 'activate', value: 'nope' }), NotFoundError);
    const firstTab = moved.tabs.find((t) => !t.active)!;
    await h.pool.input(P, row.id, { kind: 'tab', action: 'close', value: '' });
    const back = await waitFor(0, (f) => f.tabs.length === 1);
    assert.deepEqual(back.tabs.map((t) => [t.id, t.active]), [[firstTab.id, true]], 'closing the active tab makes the remaining one active');

    const stopped = h.pool.stop(P, row.id, 'user');
    await Promise.all(streams); // streams end when the browser stops
    await stopped;
    await b.disconnect().catch(() => {});
    assert.ok(seen[0].length >= 2 && seen[1].length >= 2);
  });

  test('when a page downloads a file, then it is listed with a link to exactly its bytes, also after the browser stopped', async () => {
    const h = await harness({ warmSize: 0 });
    const row = await h.pool.create({ projectId: P });
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, `${site.origin}/download.html`);
    await page.click('#report');
    // Chromium renames the file into place when complete.
    const items = await until(async () => nonEmpty(await h.pool.downloads(P, row.id)), { intervalMs: 50, what: 'the download' });
    const expected = fs.readFileSync(path.join(SITE_DIR, 'report.csv'));
    assert.deepEqual(items.map((d) => [d.name, d.sizeBytes]), [['report.csv', expected.length]]);
    const key = new URL(items[0]!.downloadUrl).pathname.slice(1);
    assert.deepEqual(h.objects.get(`${P}/${key}`), expected);
    await b.disconnect();
    await h.pool.stop(P, row.id, 'user');
    const after = await h.pool.downloads(P, row.id);
    assert.deepEqual(after.map((d) => d.name), ['report.csv']);
    await assert.rejects(h.pool.downloads('prj_other', row.id), NotFoundError);
  });

  test('when Playwright points downloads at its own folder, then the download still lands in the browser folder under its suggested name', async () => {
    const h = await harness({ warmSize: 0 });
    const row = await h.pool.create({ projectId: P });
    const browser = await chromium.connectOverCDP(h.pool.cdpUrlFor(row));
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.goto(`${site.origin}/download.html`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#report')]);
    assert.equal(download.suggestedFilename(), 'report.csv');
    const items = await until(async () => nonEmpty(await h.pool.downloads(P, row.id)), { intervalMs: 50, what: 'the download' });
    assert.deepEqual(items.map((d) => d.name), ['report.csv']);
    const key = new URL(items[0]!.downloadUrl).pathname.slice(1);
    assert.deepEqual(h.objects.get(`${P}/${key}`), fs.readFileSync(path.join(SITE_DIR, 'report.csv')));
    await browser.close();
    await h.pool.stop(P, row.id, 'user');
  });
});

describe('proxies per country', () => {
  test('when a browser asks for a country whose proxy needs credentials, then its pages load through that proxy with them', async () => {
    const seen: { host: string | undefined; auth: string | undefined; lang: string | undefined }[] = [];
    // A forward proxy that wants Basic credentials and serves every host from the fixture site.
    const upstream = http.createServer((req, res) => {
      seen.push({ host: req.headers.host, auth: req.headers['proxy-authorization'], lang: req.headers['accept-language'] });
      if (req.headers['proxy-authorization'] !== `Basic ${Buffer.from('user:s3cret').toString('base64')}`) {
        res.writeHead(407, { 'Proxy-Authenticate': 'Basic realm="test"' }).end();
        return;
      }
      const target = new URL(req.url!);
      http.get(`${site.origin}${target.pathname}`, (r) => {
        res.writeHead(r.statusCode!, r.headers);
        r.pipe(res);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    const h = await harness({ warmSize: 0, proxyUrls: new Map([['de', new URL(`http://user:s3cret@127.0.0.1:${port}`)]]) });
    const row = await h.pool.create({ projectId: P, proxyCountryCode: 'de', screenWidth: 800, screenHeight: 600 });
    assert.equal(row.proxyCountryCode, 'de');
    const b = await connect(h.pool.cdpUrlFor(row));
    const page = await openPage(b, 'http://shop.example.de/index.html');
    assert.equal(await page.title(), 'Fixture home');
    assert.equal(await page.evaluate(() => [innerWidth, innerHeight].join('x')), '800x600');
    assert.ok(seen.some((s) => s.host === 'shop.example.de' && s.auth));
    // Its locale and timezone default to the country's, and every surface agrees.
    assert.equal(row.locale, 'de-DE');
    assert.equal(row.timezone, 'Europe/Berlin');
    assert.equal(seen.at(-1)!.lang, 'de-DE,de;q=0.9');
    assert.deepEqual(await page.evaluate(() => [navigator.language, Intl.DateTimeFormat().resolvedOptions().timeZone, new Date(Date.UTC(2026, 0, 15, 12)).getHours()]), ['de-DE', 'Europe/Berlin', 13]);
    await b.disconnect();
    await h.stop();
    await new Promise<void>((r) => upstream.close(() => r()));
  });
});

describe('restart after a crash', () => {
  test("when a pool restarts on a crashed one's data, then it kills the leftover Chromium groups, removes their directories and records them stopped", async () => {
    const rootDir = path.join(dataDir, 'crash-root');
    // What a pool killed with SIGKILL leaves: active records, their Chromium groups and directories,
    // and a warm browser that had no record yet.
    const repo = new BrowserRepository(db.knex, db.driver);
    const launched = await Promise.all(['brw_crash1', 'brw_crash2', 'brw_crash3', 'brw_warm_left'].map((id) => Chromium.launch({ executable: defaultChromiumPath(), rootDir, id, width: 800, height: 600, confinement: hostConfinement(), logger })));
    const rows: BrowserRow[] = [];
    for (const c of launched.slice(0, 3)) {
      const timeoutAt = new Date(now + 3600_000).toISOString();
      rows.push((await repo.insertUnderCap({ id: c.id, projectId: P, profileId: null, sessionId: null, runId: null, agent: null, screenWidth: 800, screenHeight: 600, proxyCountryCode: null, stealth: true, locale: null, timezone: null, allowedDomains: null, blockAds: false, liveViewUrl: null, instanceId: 'bpi_crash', pid: c.pid, timeoutAt }, 100, new Date(now)))!);
    }
    const groups = new Set(chromiumUnder(rootDir).map((p) => p.pgid));
    assert.deepEqual([...groups].sort(), launched.map((c) => c.pgid).sort());

    const restarted = await harness({ rootDir, warmSize: 0, instanceId: 'bpi_crash' });
    for (const pgid of groups) assert.deepEqual(groupMembers(pgid), [], `group ${pgid} is gone`);
    assert.deepEqual(fs.readdirSync(rootDir), []);
    assert.deepEqual(strayTempDirs(rootDir), []);
    for (const r of rows) {
      const now = (await restarted.browsers.byId(r.id))!;
      assert.equal(now.status, 'stopped');
      assert.equal(now.stopReason, 'shutdown');
    }
    assert.deepEqual(restarted.events.map((e) => [e.kind, e.row.id]).sort(), rows.map((r) => ['stopped', r.id]).sort());
    await Promise.all(launched.map((c) => c.stop()));
  });
});

describe('what a browser may reach', () => {
  test('when a CDP client opens file: or chrome: URLs or sets host files on an input, then each is refused and the browser goes on working', async () => {
    const h = await harness({ warmSize: 0 });
    const row = await h.pool.create({ projectId: P });
    const b = await connect(h.pool.cdpUrlFor(row));
    try {
      const [page] = await b.pages();
      for (const url of ['file:///etc/hostname', `file://${h.rootDir}`, 'chrome://version', 'view-source:file:///etc/passwd']) {
        await assert.rejects(page!.goto(url), /URLs are blocked in this browser/, url);
      }
      await assert.rejects(b.newPage().then((p) => p.goto('file:///etc/passwd')), /URLs are blocked/);
      await assert.rejects(
        (async () => {
          const t = await b.target().createCDPSession();
          await t.send('Target.createTarget', { url: 'file:///etc/passwd' });
        })(),
        /URLs are blocked/,
      );
      await page!.goto(`${site.origin}/run-upload.html`);
      const input = (await page!.$('input[type=file]'))!;
      await assert.rejects(input.uploadFile('/etc/passwd'), /only files in the browser's downloads folder/);
      assert.equal(await page!.$eval('input[type=file]', (el) => (el as HTMLInputElement).files!.length), 0, 'no host file reached the page');
      await page!.goto(`${site.origin}/index.html`);
      assert.equal(await page!.title(), 'Fixture home', 'the browser keeps working after the refusals');
    } finally {
      await b.disconnect();
    }
  });

  test("when a page reaches for the services' ports, another browser's DevTools or cloud metadata, then nothing answers it; the site's own loopback pages still load", async () => {
    const hits: string[] = [];
    const internal = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.end('internal');
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    const internalPort = (internal.address() as AddressInfo).port;
    const h = await harness({ warmSize: 0, deniedPorts: [internalPort] });
    const [rowA, rowB] = [await h.pool.create({ projectId: P }), await h.pool.create({ projectId: 'prj_other' })];
    const a = await connect(h.pool.cdpUrlFor(rowA));
    try {
      const [page] = await a.pages();
      await page!.goto(`${site.origin}/index.html`);
      const egressB = h.pool.live(rowB.id)!.egress.port;
      const cdpPort = Number(new URL(h.pool.cdpUrlFor(rowA)).port);
      const tries = await page!.evaluate(
        async (targets: string[]) =>
          Promise.all(
            targets.map(async (url) => {
              try {
                const r = await fetch(url, { mode: 'no-cors' });
                return `${url} ${r.type === 'opaque' ? 'opaque' : r.status}`;
              } catch (err) {
                return `${url} failed: ${(err as Error).message}`;
              }
            }),
          ),
        [
          `http://127.0.0.1:${internalPort}/grpc`,
          `http://localhost:${internalPort}/grpc`,
          `http://0.0.0.0:${internalPort}/grpc`,
          `http://[::ffff:127.0.0.1]:${internalPort}/grpc`,
          `http://127.0.0.1:${cdpPort}/cdp/${rowB.id}/json/list`,
          `http://127.0.0.1:${egressB}/`,
          'http://169.254.169.254/latest/meta-data/',
        ],
      );
      // A refused plain-http request is a 403 page from the egress proxy (opaque to no-cors fetch);
      // what matters is that none of it reached the service behind the port.
      assert.deepEqual(hits, [], `the internal service saw no request: ${tries.join('; ')}`);
      const shown = await page!.goto(`http://127.0.0.1:${internalPort}/grpc`);
      assert.equal(shown!.status(), 403);
      assert.match(await page!.evaluate(() => document.body.innerText), /Blocked by the browser network policy: internal service port/);
      const meta = await page!.goto('http://169.254.169.254/latest/meta-data/');
      assert.equal(meta!.status(), 403);
      assert.match(await page!.evaluate(() => document.body.innerText), /Blocked by the browser network policy: link-local/);
      assert.deepEqual(hits, []);
      await page!.goto(`${site.origin}/index.html`);
      assert.equal(await page!.title(), 'Fixture home');
    } finally {
      await a.disconnect();
      internal.close();
    }
  });
});
