/**
 * Browsers and profiles through the real stack: the public routes, the CDP proxy with puppeteer
 * and Playwright, profiles across browsers, downloads into file storage, NATS lifecycle events,
 * frames and input over gRPC, and a SIGKILL of the pool with browsers open.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node';
import { chromium } from 'playwright-core';
import puppeteer, { type Browser as PuppeteerBrowser } from 'puppeteer-core';
import { Agent, type BrowserLifecycleEvent } from '../gen/ats/common/v1/common.js';
import { BrowserPoolServiceService, BrowserStatus, KeyEventType, StopReason, type StreamFramesResponse } from '../gen/ats/browserpool/v1/browser_pool.js';
import { RemoteError, Status } from '../services/common/src/errors.js';
import { createServiceClient, type ServiceClient } from '../services/common/src/grpc.js';
import { CREATE_DEADLINE_MS } from '../services/run/src/browser-capacity.js';
import { createLogger } from '../services/common/src/logger.js';
import { browserLifecycle, subscribe, type Delivery } from '../services/common/src/subjects.js';
import { strayTempDirs } from '../services/browser-pool/src/chromium.js';
import { processesUsing } from '../services/browser-pool/src/process-groups.js';
import { SITE_DIR, startFixtureSite, type FixtureSite } from '../services/browser-pool/src/testing/fixture-site.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until, within } from './support/until.js';

interface BrowserJson {
  id: string;
  status: 'active' | 'stopped';
  cdpUrl: string | null;
  liveViewUrl: string | null;
  profileId: string | null;
  sessionId: string | null;
  runId: string | null;
  stealth: boolean;
  locale: string | null;
  timezone: string | null;
  allowedDomains: string[];
  blockAds: boolean;
  screenWidth: number;
  screenHeight: number;
  createdAt: string;
  timeoutAt: string;
  stoppedAt: string | null;
}
interface ProfileJson {
  id: string;
  name: string;
  userId: string | null;
  lastUsedAt: string | null;
  cookieDomains: string[];
}

let f: StackFixture;
let site: FixtureSite;
let pool: ServiceClient<typeof BrowserPoolServiceService>;
let nc: NatsConnection;
let rootDir: string;

before(async () => {
  site = await startFixtureSite();
  // Each browser in a Chromium of its own (no reuse): these tests find a browser's processes and folder by its id.
  f = await startStackFixture({ projects: ['alpha', 'beta'], env: { ...NOT_RECORDED, MAX_ACTIVE_BROWSERS_PER_PROJECT: '3', POOL_REUSE_SECONDS: '0' } });
  rootDir = path.join(f.dataDir, 'browser-pool', 'browsers');
  pool = createServiceClient(BrowserPoolServiceService, `127.0.0.1:${f.stack.ports.get('browser-pool')}`, CREATE_DEADLINE_MS, f.stack.internalToken);
  nc = await natsConnect({ servers: f.stack.natsUrl, ...(f.stack.natsToken ? { token: f.stack.natsToken } : {}) });
});

after(async () => {
  pool?.close();
  await nc?.close();
  try {
    // A graceful stop of the stack stops every browser; then nothing of them may be left.
    await f?.stack.stop();
    assert.deepEqual(chromiumUnder(''), [], 'no Chromium process of the stack outlives it');
    assert.deepEqual(fs.readdirSync(rootDir), [], 'no browser directory is left');
    assert.deepEqual(strayTempDirs(rootDir), [], 'no temporary directory is left');
  } finally {
    await f?.stop();
    await site?.close();
  }
});

const alpha = () => f.projects.alpha!;
const beta = () => f.projects.beta!;
/** Live Chromium processes of one browser ('' = of any browser of this stack). */
const chromiumUnder = (browserId: string) => processesUsing(`--user-data-dir=${path.join(rootDir, browserId)}${browserId ? path.sep : ''}`);

async function call(key: string, method: string, url: string, body?: unknown): Promise<Response> {
  return f.api(url, { method, key, headers: body === undefined ? {} : { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

async function createBrowser(body: Record<string, unknown> = {}, key = alpha().key): Promise<BrowserJson> {
  const res = await call(key, 'POST', '/api/v1/browsers', body);
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as BrowserJson;
}

async function stopBrowser(id: string, key = alpha().key): Promise<BrowserJson> {
  const res = await call(key, 'POST', `/api/v1/browsers/${id}/stop`);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as BrowserJson;
}

const connectPuppeteer = (cdpUrl: string) => puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });

async function firstPage(b: PuppeteerBrowser) {
  return (await b.pages())[0]!;
}

async function logIn(cdpUrl: string, user: string): Promise<void> {
  const b = await connectPuppeteer(cdpUrl);
  const page = await firstPage(b);
  await page.goto(`${site.origin}/login.html`);
  await page.type('#user', user);
  await Promise.all([page.waitForFunction(() => document.getElementById('status')!.textContent === 'logged in'), page.click('#submit')]);
  await b.disconnect();
}

/** What the account page shows: the server's view (cookie) and the browser's (localStorage). */
async function whoAmI(cdpUrl: string): Promise<{ server: string; client: string }> {
  const b = await connectPuppeteer(cdpUrl);
  const page = await firstPage(b);
  await page.goto(`${site.origin}/account.html`);
  await page.waitForFunction(() => document.title === 'Account ready');
  const who = await page.evaluate(() => ({ server: document.getElementById('server')!.textContent!, client: document.getElementById('client')!.textContent! }));
  await b.disconnect();
  return who;
}

describe('a browser driven over CDP', () => {
  test('when a browser is created, driven with puppeteer through cdpUrl and stopped, then its process is gone and cdpUrl is refused', async () => {
    const b = await createBrowser();
    assert.match(b.id, /^brw_[a-z0-9]{24}$/);
    assert.equal(b.status, 'active');
    const cdp = new URL(b.cdpUrl!);
    assert.equal(`${cdp.protocol}//${cdp.host}`, f.stack.edgeUrl('cdp').replace(/^http/, 'ws'));
    assert.equal(cdp.pathname, `/cdp/${b.id}`);
    assert.ok(cdp.searchParams.get('token'));
    assert.ok(b.liveViewUrl!.startsWith(`${f.stack.edgeUrl('liveView')}/browsers/${b.id}?token=`), 'a live view URL minted by the live-view service');
    assert.deepEqual([b.screenWidth, b.screenHeight], [1280, 800]);
    assert.deepEqual([b.stealth, b.locale, b.timezone], [true, 'en-US', 'UTC'], 'stealth by default, en-US and UTC without a proxy country');
    assert.equal(b.blockAds, false, 'a standalone browser blocks no ads unless asked');
    assert.ok(Date.parse(b.timeoutAt) - Date.parse(b.createdAt) === 60 * 60_000, 'default timeout: 60 minutes');
    assert.ok(chromiumUnder(b.id).length > 0, 'its own Chromium is running');

    const client = await connectPuppeteer(b.cdpUrl!);
    const page = await firstPage(client);
    await page.goto(`${site.origin}/index.html`);
    assert.equal(await page.title(), 'Fixture home');
    assert.equal(await page.evaluate(() => `${innerWidth}x${innerHeight}`), '1280x800');
    assert.deepEqual(await page.evaluate(() => [navigator.webdriver, /Headless/.test(navigator.userAgent)]), [false, false], 'no automation tells');
    const version = (await (await fetch(b.cdpUrl!.replace(/^ws/, 'http').replace('?', '/json/version?'))).json()) as { webSocketDebuggerUrl: string };
    assert.equal(version.webSocketDebuggerUrl, b.cdpUrl);

    const stopped = await stopBrowser(b.id);
    assert.equal(stopped.status, 'stopped');
    assert.equal(stopped.cdpUrl, null);
    assert.ok(stopped.stoppedAt);
    // The stop answers once the browser is recorded stopped; its process ends right after (the profile saved first).
    await until(() => chromiumUnder(b.id).length === 0, { timeoutMs: 20_000, what: 'no process of it left' });
    await assert.rejects(connectPuppeteer(b.cdpUrl!), 'cdpUrl is refused');
    assert.equal(client.connected, false, 'the attached client was cut');
    assert.equal((await stopBrowser(b.id)).stoppedAt, stopped.stoppedAt, 'stop is idempotent');
    const read = (await (await call(alpha().key, 'GET', `/api/v1/browsers/${b.id}`)).json()) as BrowserJson;
    assert.equal(read.status, 'stopped');
  });

  test("when Playwright connects over CDP, then it drives the browser's default context until the browser stops", async () => {
    const b = await createBrowser({ screen_width: 800, screen_height: 600, timeout_minutes: 5, stealth: false, locale: 'ja-JP', timezone: 'Asia/Tokyo', allowed_domains: ['127.0.0.1', '*.Example.test'], block_ads: true });
    assert.deepEqual([b.screenWidth, b.screenHeight], [800, 600]);
    assert.deepEqual([b.stealth, b.locale, b.timezone, b.allowedDomains, b.blockAds], [false, 'ja-JP', 'Asia/Tokyo', ['127.0.0.1', '*.example.test'], true], 'the record returns what it was created with');
    assert.ok(Date.parse(b.timeoutAt) - Date.parse(b.createdAt) === 5 * 60_000);
    const browser = await chromium.connectOverCDP(b.cdpUrl!);
    const context = browser.contexts()[0]!;
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${site.origin}/index.html`);
    assert.equal(await page.title(), 'Fixture home');
    assert.equal(await page.evaluate(() => `${innerWidth}x${innerHeight}`), '800x600');
    const closed = new Promise<void>((r) => browser.once('disconnected', () => r()));
    await stopBrowser(b.id);
    await within(closed, 'the connection closed');
    await until(() => chromiumUnder(b.id).length === 0, { timeoutMs: 20_000, what: 'no process of it left' });
    await assert.rejects(chromium.connectOverCDP(b.cdpUrl!, { timeout: 5000 }));
  });

  test('when a tampered token is used, then the proxy refuses it', async () => {
    const b = await createBrowser();
    const tampered = b.cdpUrl!.replace(/token=(.)/, (_m, c) => `token=${c === '1' ? '2' : '1'}`);
    await assert.rejects(connectPuppeteer(tampered));
    const res = await fetch(tampered.replace(/^ws/, 'http').replace('?', '/json/version?'));
    assert.equal(res.status, 401);
    await stopBrowser(b.id);
  });
});

describe('profiles', () => {
  test('when a browser with profile P logs in and stops, then a new browser with P is logged in, one without is not, and two profiles never mix', async () => {
    const mk = async (name: string) => {
      const res = await call(alpha().key, 'POST', '/api/v1/browser-profiles', { name, user_id: `u-${name}` });
      assert.equal(res.status, 201, await res.clone().text());
      return (await res.json()) as ProfileJson;
    };
    const ada = await mk('ada');
    const bob = await mk('bob');
    assert.deepEqual([ada.cookieDomains, ada.lastUsedAt, ada.userId], [[], null, 'u-ada']);

    const first = await createBrowser({ browser_profile_id: ada.id });
    assert.equal(first.profileId, ada.id);
    await logIn(first.cdpUrl!, 'ada');
    await stopBrowser(first.id);
    const savedAda = (await (await call(alpha().key, 'GET', `/api/v1/browser-profiles/${ada.id}`)).json()) as ProfileJson;
    assert.deepEqual(savedAda.cookieDomains, ['127.0.0.1']);
    assert.ok(savedAda.lastUsedAt);

    const bobBrowser = await createBrowser({ browser_profile_id: bob.id });
    await logIn(bobBrowser.cdpUrl!, 'bob');
    await stopBrowser(bobBrowser.id);

    const [withAda, withBob, withNone] = await Promise.all([createBrowser({ browser_profile_id: ada.id }), createBrowser({ browser_profile_id: bob.id }), createBrowser()]);
    assert.deepEqual(await whoAmI(withAda.cdpUrl!), { server: 'ada', client: 'ada' });
    assert.deepEqual(await whoAmI(withBob.cdpUrl!), { server: 'bob', client: 'bob' });
    assert.deepEqual(await whoAmI(withNone.cdpUrl!), { server: 'nobody', client: 'nobody' });
    await Promise.all([withAda, withBob, withNone].map((b) => stopBrowser(b.id)));
  });

  test('when profiles are listed, renamed and deleted, then the changes show and a deleted profile is gone for good', async () => {
    const created = (await (await call(alpha().key, 'POST', '/api/v1/browser-profiles', { name: 'temp' })).json()) as ProfileJson;
    const list = (await (await call(alpha().key, 'GET', '/api/v1/browser-profiles?limit=200')).json()) as { items: ProfileJson[] };
    assert.ok(list.items.some((p) => p.id === created.id));
    assert.equal(((await (await call(beta().key, 'GET', '/api/v1/browser-profiles')).json()) as { items: ProfileJson[] }).items.length, 0, 'another project sees none');
    const renamed = await call(alpha().key, 'PATCH', `/api/v1/browser-profiles/${created.id}`, { name: 'kept' });
    assert.equal(((await renamed.json()) as ProfileJson).name, 'kept');
    assert.equal((await call(beta().key, 'PATCH', `/api/v1/browser-profiles/${created.id}`, { name: 'theirs' })).status, 404);
    assert.equal((await call(alpha().key, 'DELETE', `/api/v1/browser-profiles/${created.id}`)).status, 204);
    assert.equal((await call(alpha().key, 'DELETE', `/api/v1/browser-profiles/${created.id}`)).status, 204, 'idempotent');
    assert.equal((await call(alpha().key, 'GET', `/api/v1/browser-profiles/${created.id}`)).status, 404);
    assert.equal((await call(alpha().key, 'POST', '/api/v1/browsers', { browser_profile_id: created.id })).status, 404);
  });
});

describe('downloads', () => {
  test('when a page downloads a file, then the browser lists it and its downloadUrl returns the bytes', async () => {
    const b = await createBrowser();
    const client = await connectPuppeteer(b.cdpUrl!);
    const page = await firstPage(client);
    await page.goto(`${site.origin}/download.html`);
    await page.click('#report');
    const expected = fs.readFileSync(path.join(SITE_DIR, 'report.csv'));
    // Listed once Chromium has moved the finished file into place.
    const items = await until(async () => {
      const res = await call(alpha().key, 'GET', `/api/v1/browsers/${b.id}/downloads`);
      assert.equal(res.status, 200);
      const { items } = (await res.json()) as { items: { name: string; sizeBytes: number; lastModified: string; downloadUrl: string }[] };
      return items.length > 0 && items;
    }, { timeoutMs: 10000, intervalMs: 50, what: 'the download listed' });
    assert.deepEqual(items.map((d) => [d.name, d.sizeBytes]), [['report.csv', expected.length]]);
    assert.ok(!Number.isNaN(Date.parse(items[0]!.lastModified)));
    const got = await fetch(items[0]!.downloadUrl);
    assert.equal(got.status, 200);
    assert.deepEqual(Buffer.from(await got.arrayBuffer()), expected);
    await client.disconnect();
    await stopBrowser(b.id);
    const afterStop = (await (await call(alpha().key, 'GET', `/api/v1/browsers/${b.id}/downloads`)).json()) as { items: typeof items };
    assert.deepEqual(afterStop.items.map((d) => d.name), ['report.csv'], 'downloads outlive the browser');
    assert.equal((await call(beta().key, 'GET', `/api/v1/browsers/${b.id}/downloads`)).status, 404);
  });
});

describe('bad input and limits', () => {
  test('when the request is wrong or not allowed, then it is refused with the right status', async () => {
    const unknownProfile = await call(alpha().key, 'POST', '/api/v1/browsers', { browser_profile_id: 'prf_doesnotexist00000000000' });
    assert.equal(unknownProfile.status, 404);
    assert.equal((await call(alpha().key, 'POST', '/api/v1/browsers', { screen_width: 1024 })).status, 422);
    assert.equal((await call(alpha().key, 'POST', '/api/v1/browsers', { screen_width: 100, screen_height: 600 })).status, 422);
    assert.equal((await call(alpha().key, 'POST', '/api/v1/browsers', { screen_width: 1024, screen_height: 9000 })).status, 422);
    const noProxy = await call(alpha().key, 'POST', '/api/v1/browsers', { proxy_country_code: 'fr' });
    assert.equal(noProxy.status, 422);
    assert.deepEqual(await noProxy.json(), {
      detail: [{ type: 'value_error', loc: ['body', 'proxy_country_code'], msg: 'Value error, No proxy is configured for country "fr"', input: 'fr' }],
    });

    for (const [body, field] of [[{ timezone: 'Mars/Olympus' }, 'timezone'], [{ locale: 'not a locale' }, 'locale'], [{ stealth: 'yes' }, 'stealth'], [{ block_ads: 'yes' }, 'block_ads']] as const) {
      const res = await call(alpha().key, 'POST', '/api/v1/browsers', body);
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.deepEqual(((await res.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc, ['body', field]);
    }
    const badZone = await call(alpha().key, 'POST', '/api/v1/agents/browser-agent/runs', { task: 'open the page', model: 'builtin', browser: { timezone: 'Europe/Atlantis' } });
    assert.equal(badZone.status, 422, 'a run with an unknown timezone is refused before it is queued');
    assert.deepEqual(((await badZone.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc, ['body', 'browser', 'timezone']);
    const outside = await call(alpha().key, 'POST', '/api/v1/agents/browser-agent/runs', { task: 'read https://shop.example.com/prices', model: 'builtin', browser: { allowed_domains: ['*.example.org'] } });
    assert.equal(outside.status, 422, "a run whose task names a URL outside its allowed domains is refused");
    assert.deepEqual(((await outside.json()) as { detail: { loc: string[]; msg: string }[] }).detail[0]!.loc, ['body', 'task']);
    assert.equal((await call(alpha().key, 'POST', '/api/v1/browsers', { allowed_domains: ['exa mple.com'] })).status, 422);

    const theirs = await createBrowser({}, beta().key);
    assert.equal((await call(alpha().key, 'GET', `/api/v1/browsers/${theirs.id}`)).status, 404);
    assert.equal((await call(alpha().key, 'POST', `/api/v1/browsers/${theirs.id}/stop`)).status, 404);
    assert.equal(((await (await call(beta().key, 'GET', `/api/v1/browsers/${theirs.id}`)).json()) as BrowserJson).status, 'active', 'untouched');
    await stopBrowser(theirs.id, beta().key);
  });

  test('when a run names an unknown, foreign or deleted profile or a country without a proxy, then 404 or 422 as at POST /browsers, and nothing is created', async () => {
    const mine = (await (await call(alpha().key, 'POST', '/api/v1/browser-profiles', { name: 'kept' })).json()) as { id: string };
    const gone = (await (await call(alpha().key, 'POST', '/api/v1/browser-profiles', { name: 'gone' })).json()) as { id: string };
    assert.equal((await call(alpha().key, 'DELETE', `/api/v1/browser-profiles/${gone.id}`)).status, 204);
    const theirs = (await (await call(beta().key, 'POST', '/api/v1/browser-profiles', { name: 'theirs' })).json()) as { id: string };
    const count = async (url: string) => ((await (await call(alpha().key, 'GET', url)).json()) as { items: unknown[] }).items.length;
    const state = async () => [await count('/api/v1/agents/browser-agent/runs'), await count('/api/v1/agents/browsercode/runs'), await count('/api/v1/agents/browser-agent/sessions'), await count('/api/v1/agents/browsercode/sessions'), await count('/api/v1/browsers')];
    const before = await state();

    const asBrowser = await call(alpha().key, 'POST', '/api/v1/browsers', { browser_profile_id: 'prf_doesnotexist00000000000' });
    assert.equal(asBrowser.status, 404);
    const sameDetail = await asBrowser.json();
    for (const agent of ['browser-agent', 'browsercode']) {
      for (const profile_id of ['prf_doesnotexist00000000000', theirs.id, gone.id]) {
        const res = await call(alpha().key, 'POST', `/api/v1/agents/${agent}/runs`, { task: 'open the page', model: 'builtin', browser: { profile_id } });
        assert.equal(res.status, 404, `${agent} ${profile_id}`);
        assert.deepEqual(await res.json(), sameDetail);
      }
      const noProxy = await call(alpha().key, 'POST', `/api/v1/agents/${agent}/runs`, { task: 'open the page', model: 'builtin', browser: { proxy_country_code: 'fr', profile_id: mine.id } });
      assert.equal(noProxy.status, 422);
      assert.deepEqual(await noProxy.json(), {
        detail: [{ type: 'value_error', loc: ['body', 'browser', 'proxy_country_code'], msg: 'Value error, No proxy is configured for country "fr"', input: 'fr' }],
      });
    }
    assert.deepEqual(await state(), before, 'no run, session or browser was created');

    // The same check lets the project's own live profile through (a task the builtin model refuses: no browser starts).
    const ok = await call(alpha().key, 'POST', '/api/v1/agents/browsercode/runs', { task: 'hum a tune', model: 'builtin', browser: { profile_id: mine.id } });
    assert.equal(ok.status, 202, await ok.clone().text());
    const run = (await ok.json()) as { id: string };
    await call(alpha().key, 'POST', `/api/v1/agents/browsercode/runs/${run.id}/stop`);
  });

  test('when a project has its maximum of active browsers, then one more is 429 with Retry-After, until one stops', async () => {
    const open = [await createBrowser(), await createBrowser(), await createBrowser()];
    const over = await call(alpha().key, 'POST', '/api/v1/browsers', {});
    assert.equal(over.status, 429);
    assert.ok(Number(over.headers.get('retry-after')) >= 1);
    const other = await createBrowser({}, beta().key);
    const active = (await (await call(alpha().key, 'GET', '/api/v1/browsers?status=active')).json()) as { items: BrowserJson[] };
    assert.deepEqual(active.items.map((b) => b.id).sort(), open.map((b) => b.id).sort());
    await stopBrowser(open[0]!.id);
    const next = await createBrowser();
    await Promise.all([...open.slice(1), next].map((b) => stopBrowser(b.id)));
    await stopBrowser(other.id, beta().key);
  });
});

describe('for the other services', () => {
  test('when a browser starts and stops, then NATS carries started and stopped events for it, each with the id of the request that caused it', async () => {
    const got: Delivery<{ browserId: string; kind: string }, BrowserLifecycleEvent>[] = [];
    const sub = subscribe(nc, browserLifecycle, (d) => void got.push(d), { logger: createLogger('test', 'silent') });
    await nc.flush();
    const created = await call(alpha().key, 'POST', '/api/v1/browsers', {});
    assert.equal(created.status, 201);
    const b = (await created.json()) as BrowserJson;
    const stopped = await call(alpha().key, 'POST', `/api/v1/browsers/${b.id}/stop`);
    assert.equal(stopped.status, 200);
    // The stop answers once the browser is recorded stopped; the event follows when its process is gone.
    await until(() => got.filter((g) => g.key.browserId === b.id).length >= 2, { timeoutMs: 20_000, what: 'the started and stopped events' });
    sub.unsubscribe();
    const mine = got.filter((g) => g.key.browserId === b.id);
    assert.deepEqual(mine.map((g) => g.key.kind), ['started', 'stopped']);
    assert.equal(mine[0]!.payload.browserId, b.id);
    assert.equal(mine[0]!.payload.projectId, alpha().projectId);
    assert.equal(mine[1]!.payload.reason, 'user');
    assert.deepEqual(mine.map((g) => g.requestId), [created.headers.get('x-request-id'), stopped.headers.get('x-request-id')]);
    for (const g of mine) assert.ok(!Number.isNaN(Date.parse(g.payload.ts)) && g.payload.sessionId === undefined && g.payload.runId === undefined);
  });

  test("when a run's browser is streamed to two viewers and given input over gRPC, then both see frames and the page gets the keys", async () => {
    const { projectId } = alpha();
    const { browser } = await pool.api.createBrowser({ projectId, sessionId: 'ses_grpc', runId: 'run_grpc', agent: Agent.AGENT_BROWSER_AGENT, allowedDomains: [] });
    const id = browser!.id;
    assert.equal(browser!.runId, 'run_grpc');
    const listed = (await (await call(alpha().key, 'GET', '/api/v1/browsers?session_id=ses_grpc')).json()) as { items: BrowserJson[] };
    assert.deepEqual(listed.items.map((b) => b.id), [id]);
    const { websocketUrl } = await pool.api.getCdpEndpoint({ projectId, browserId: id });
    // Chromium has no DevTools port: the run service too goes through the CDP proxy, with a token for this browser.
    assert.match(websocketUrl, new RegExp(`^ws://127\\.0\\.0\\.1:${f.stack.edgePorts.get('cdp')}/cdp/${id}\\?token=`));
    const agent = await connectPuppeteer(websocketUrl);
    const page = await firstPage(agent);
    await page.goto(`${site.origin}/index.html`);

    const streams = [0, 1].map(() => pool.api.streamFrames({ projectId, browserId: id, passive: false }));
    // Each viewer sees an image of the page and, with it or in a later metadata message, its title.
    const images: Promise<StreamFramesResponse>[] = [];
    const titles: Promise<void>[] = [];
    const ended = streams.map((s, i) => new Promise<void>((resolve, reject) => {
      images[i] = new Promise((got) => s.on('data', (m: StreamFramesResponse) => m.jpeg.length > 0 && m.url.endsWith('/index.html') && got(m)));
      titles[i] = new Promise((got) => s.on('data', (m: StreamFramesResponse) => m.title === 'Fixture home' && got()));
      s.on('end', () => resolve());
      s.on('error', reject);
    }));
    await Promise.all(titles);
    for (const m of await Promise.all(images)) {
      assert.equal(m.width, 1280);
      assert.ok(m.timestampMs > 1e12);
      assert.deepEqual(m.tabs.map((t) => t.active), [true]);
    }
    for (const ch of 'ok') {
      await pool.api.dispatchInput({ projectId, browserId: id, key: { type: KeyEventType.KEY_EVENT_TYPE_DOWN, key: ch, code: `Key${ch.toUpperCase()}`, text: ch, modifiers: 0 } });
      await pool.api.dispatchInput({ projectId, browserId: id, key: { type: KeyEventType.KEY_EVENT_TYPE_UP, key: ch, code: `Key${ch.toUpperCase()}`, text: '', modifiers: 0 } });
    }
    await page.waitForFunction(() => document.getElementById('typed')!.textContent === 'ok');
    await assert.rejects(pool.api.dispatchInput({ projectId, browserId: id }), (e: unknown) => e instanceof RemoteError && e.code === Status.INVALID_ARGUMENT);
    const foreign = pool.api.streamFrames({ projectId: beta().projectId, browserId: id, passive: false });
    await assert.rejects(
      new Promise((resolve, reject) => {
        foreign.on('data', () => {});
        foreign.on('end', resolve);
        foreign.on('error', reject);
      }),
      (e: { code?: number }) => e.code === Status.NOT_FOUND,
      "another project's browser cannot be watched",
    );

    const released = await pool.api.releaseBrowser({ projectId, browserId: id, runId: 'run_grpc' });
    assert.equal(released.browser!.runId, undefined);
    assert.equal(released.browser!.status, BrowserStatus.BROWSER_STATUS_ACTIVE);
    await agent.disconnect();
    const { browser: stopped } = await pool.api.stopBrowser({ projectId, browserId: id, reason: StopReason.STOP_REASON_RUN_ENDED });
    assert.equal(stopped!.stopReason, StopReason.STOP_REASON_RUN_ENDED);
    await Promise.all(ended); // both streams end when the browser stops
    await assert.rejects(pool.api.getCdpEndpoint({ projectId, browserId: id }), (e: unknown) => e instanceof RemoteError && e.code === Status.FAILED_PRECONDITION);
  });
});

describe('a crash of the pool', () => {
  test('when the pool is killed with SIGKILL with three browsers open and restarted, then it takes them over (the same processes, active) and their stops end them', async () => {
    const open = [await createBrowser(), await createBrowser(), await createBrowser()];
    const groups = open.map((b) => new Set(chromiumUnder(b.id).map((p) => p.pgid)));
    for (const g of groups) assert.equal(g.size, 1, 'each browser runs as one process group');
    await f.stack.kill('browser-pool');
    await f.stack.startService('browser-pool');
    for (const [i, b] of open.entries()) {
      const read = await until(async () => {
        const r = await call(alpha().key, 'GET', `/api/v1/browsers/${b.id}`);
        return r.status === 200 && ((await r.json()) as BrowserJson);
      }, { timeoutMs: 30_000, what: `${b.id} read again` });
      assert.equal(read.status, 'active', `${b.id} was taken over`);
      assert.deepEqual(new Set(chromiumUnder(b.id).map((p) => p.pgid)), groups[i], `${b.id} is the same Chromium`);
      await stopBrowser(b.id);
      await until(() => chromiumUnder(b.id).length === 0 && !fs.existsSync(path.join(rootDir, b.id)), { timeoutMs: 20_000, what: `${b.id} gone after its stop` });
    }
    const fresh = await createBrowser();
    assert.equal(fresh.status, 'active', 'the restarted pool serves again');
    await stopBrowser(fresh.id);
  });

  test('when the pool is killed while a stop it answered is still storing the downloads (file storage frozen), then the restarted pool stores them, saves the profile, ends the browser and announces its stop', async () => {
    const profile = (await (await call(alpha().key, 'POST', '/api/v1/browser-profiles', { name: 'unfinished stop' })).json()) as ProfileJson;
    const b = await createBrowser({ browser_profile_id: profile.id });
    await logIn(b.cdpUrl!, 'una');
    const client = await connectPuppeteer(b.cdpUrl!);
    const page = await firstPage(client);
    await page.goto(`${site.origin}/download.html`);
    await page.click('#report');
    const onDisk = path.join(rootDir, b.id, 'downloads', 'report.csv');
    await until(() => fs.existsSync(onDisk), { what: 'the download in the browser folder' });
    await client.disconnect();
    const events: Delivery<{ browserId: string; kind: string }, BrowserLifecycleEvent>[] = [];
    const sub = subscribe(nc, browserLifecycle, (d) => void events.push(d), { logger: createLogger('test', 'silent') });
    await nc.flush();
    const fileStorage = f.stack.children.get('file-storage')!.pid!;
    process.kill(fileStorage, 'SIGSTOP');
    try {
      assert.equal((await stopBrowser(b.id)).status, 'stopped', 'the stop answers; storing the downloads waits on file storage');
      await f.stack.kill('browser-pool');
    } finally {
      process.kill(fileStorage, 'SIGCONT');
    }
    assert.deepEqual(events.filter((e) => e.key.browserId === b.id).map((e) => e.key.kind), [], 'the killed process never announced the stop');
    await f.stack.startService('browser-pool');

    await until(() => events.some((e) => e.key.browserId === b.id && e.key.kind === 'stopped'), { timeoutMs: 30_000, what: 'the stop announced by the restarted pool' });
    sub.unsubscribe();
    const listed = (await (await call(alpha().key, 'GET', `/api/v1/browsers/${b.id}/downloads`)).json()) as { items: { name: string; downloadUrl: string }[] };
    assert.deepEqual(listed.items.map((d) => d.name), ['report.csv'], 'the download was stored');
    assert.deepEqual(Buffer.from(await (await fetch(listed.items[0]!.downloadUrl)).arrayBuffer()), fs.readFileSync(path.join(SITE_DIR, 'report.csv')));
    await until(() => chromiumUnder(b.id).length === 0 && !fs.existsSync(path.join(rootDir, b.id)), { timeoutMs: 20_000, what: 'its Chromium and folder gone' });
    const again = await createBrowser({ browser_profile_id: profile.id });
    assert.equal((await whoAmI(again.cdpUrl!)).server, 'una', 'its profile kept the login');
    await stopBrowser(again.id);
  });
});
