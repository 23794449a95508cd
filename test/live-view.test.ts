/**
 * The live view page in real Chromium against the real stack: a pool browser shows a test page,
 * a second Chromium (the "person") opens its live view, watches it change, clicks and types
 * through it, and sees what each kind of link allows. Screenshots go to .test-artifacts/live-view/.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser as Puppeteer, type Page } from 'puppeteer-core';
import WebSocket from 'ws';
import { LiveViewMode, LiveViewServiceService } from '../gen/ats/liveview/v1/live_view.js';
import { createServiceClient, type ServiceClient } from '../services/common/src/grpc.js';
import { Signer } from '../services/common/src/signing.js';
import { mintLiveViewToken } from '../services/live-view/src/live-view-token.js';
import { CloseCode } from '../services/live-view/src/viewer-protocol.js';
import { serveSite, type TestSite } from './support/site.js';
import { TEST_CHROMIUM_ARGS } from './support/test-chromium.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';

const ARTIFACTS = path.resolve('.test-artifacts/live-view');
const CHROMIUM_ARGS = [...TEST_CHROMIUM_ARGS, '--disable-dev-shm-usage'];

let f: StackFixture;
let site: TestSite;
let person: Puppeteer;
let liveView: ServiceClient<typeof LiveViewServiceService>;

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  [f, site, person] = await Promise.all([
    startStackFixture({ projects: ['alpha', 'beta'] }),
    serveSite(),
    puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS }),
  ]);
  liveView = createServiceClient(LiveViewServiceService, `127.0.0.1:${f.stack.ports.get('live-view')}`, 5000, f.stack.internalToken);
});
after(async () => {
  liveView?.close();
  await person?.close();
  await f?.stop();
  await site?.close();
});

const alpha = () => f.projects.alpha!;

interface PoolBrowser {
  id: string;
  liveViewUrl: string;
  /** The pool browser's page, driven over its cdpUrl (what "the browser shows"). */
  page: Page;
  stop(): Promise<void>;
}

/** A standalone 1280×800 browser from the API, showing a test page. */
async function poolBrowserOn(pageName: string): Promise<PoolBrowser> {
  const res = await f.api('/api/v1/browsers', { method: 'POST', key: alpha().key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ screen_width: 1280, screen_height: 800 }) });
  assert.equal(res.status, 201, await res.clone().text());
  const b = (await res.json()) as { id: string; liveViewUrl: string; cdpUrl: string };
  const cdp = await puppeteer.connect({ browserWSEndpoint: b.cdpUrl, defaultViewport: null });
  const [page] = await cdp.pages();
  await page!.goto(site.url(pageName));
  return {
    id: b.id,
    liveViewUrl: b.liveViewUrl,
    page: page!,
    async stop() {
      await cdp.disconnect();
      await f.api(`/api/v1/browsers/${b.id}/stop`, { method: 'POST', key: alpha().key });
    },
  };
}

/** The person opens a URL in a tab of the given size. */
async function open(url: string, viewport = { width: 1000, height: 700 }): Promise<Page> {
  const page = await person.newPage();
  await page.setViewport(viewport);
  await page.goto(url);
  return page;
}

const waitForState = (page: Page, s: string) => page.waitForSelector(`body[data-state="${s}"]`, { timeout: 15000 });

/** The colour the live view draws at a point of the browser's screen (its CSS pixels; DPR 1). */
function screenPixel(page: Page, x: number, y: number): Promise<number[]> {
  return page.evaluate((px, py) => [...(document.getElementById('screen') as HTMLCanvasElement).getContext('2d')!.getImageData(px, py, 1, 1).data].slice(0, 3), x, y);
}

/** Waits until the live view shows roughly this colour at a point of the browser's screen. */
function waitForScreenColour(page: Page, x: number, y: number, rgb: number[]): Promise<unknown> {
  return page.waitForFunction(
    (px, py, want) => {
      const d = (document.getElementById('screen') as HTMLCanvasElement).getContext('2d')!.getImageData(px, py, 1, 1).data;
      return want.every((v, i) => Math.abs(d[i]! - v) < 40);
    },
    { timeout: 15000 },
    x,
    y,
    rgb,
  );
}

/** Where a point of the browser's screen is on the person's page (the frame is scaled and centred). */
function onPage(page: Page, x: number, y: number): Promise<{ x: number; y: number }> {
  return page.evaluate(
    (px, py) => {
      const c = document.getElementById('screen') as HTMLCanvasElement;
      const r = c.getBoundingClientRect();
      return { x: r.left + (px * r.width) / c.width, y: r.top + (py * r.height) / c.height };
    },
    x,
    y,
  );
}

/** Screenshot saved as an artifact; returns its pixel at (x, y) as decoded by ffmpeg. */
async function shotPixel(page: Page, name: string, x: number, y: number): Promise<number[]> {
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file as `${string}.png` });
  const { width } = page.viewport()!;
  const raw = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { maxBuffer: 64 * 1024 * 1024 }).stdout;
  const i = (y * width + x) * 3;
  return [raw[i]!, raw[i + 1]!, raw[i + 2]!];
}

const near = (got: number[], want: number[], tolerance = 40) => got.every((v, i) => Math.abs(v - want[i]!) < tolerance);
const RED = [200, 30, 30];
const GREEN = [30, 160, 60];
const BLUE = [20, 40, 220];

function socketOf(liveViewUrl: string): string {
  const u = new URL(liveViewUrl);
  return `ws://${u.host}${u.pathname}/ws${u.search}`;
}

describe('watching and driving a browser', () => {
  test('when the live view is opened, then it shows the page and its URL, and follows a change', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      const page = await open(b.liveViewUrl);
      await waitForState(page, 'live');
      // The first picture may be the one before the page's own paint (its goto ended at load; the
      // paint's frame follows): the red one comes next.
      await waitForScreenColour(page, 40, 40, RED).catch(async () => assert.fail(`the page is red; the live view shows ${await screenPixel(page, 40, 40)}`));
      assert.equal(await page.$eval('#url', (i) => (i as HTMLInputElement).value), site.url('live-button.html'));
      assert.equal(await page.$$eval('.tab', (ts) => ts.length), 1, 'one tab');
      await page.screenshot({ path: path.join(ARTIFACTS, 'live-red.png') as `${string}.png` });

      await b.page.evaluate(() => (document.body.style.background = 'rgb(20, 40, 220)'));
      await waitForScreenColour(page, 40, 40, BLUE);
      await page.screenshot({ path: path.join(ARTIFACTS, 'live-blue.png') as `${string}.png` });
      await page.close();
    } finally {
      await b.stop();
    }
  });

  test('when the person clicks the button and types through the live view, then the browser reacts', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      // A viewport of another shape than the browser's: the frame is scaled and letterboxed.
      const page = await open(b.liveViewUrl, { width: 900, height: 760 });
      await waitForState(page, 'live');
      const button = await onPage(page, 300, 250);
      await page.mouse.click(button.x, button.y);
      await b.page.waitForFunction(() => document.title === 'Clicked 1', { timeout: 10000 });
      await waitForScreenColour(page, 40, 40, GREEN);
      // The page retitles itself on the click: the tab strip follows.
      await page.waitForFunction(() => document.querySelector('.tab.active .tab-title')?.textContent === 'Clicked 1', { timeout: 10000 });

      const field = await onPage(page, 300, 415);
      await page.mouse.click(field.x, field.y);
      await page.keyboard.type('Hello live');
      await b.page.waitForFunction(() => (document.getElementById('field') as HTMLInputElement).value === 'Hello live', { timeout: 10000 });
      assert.equal(await b.page.evaluate(() => document.getElementById('count')!.textContent), 'Clicks: 1', 'exactly one click arrived');
      await page.screenshot({ path: path.join(ARTIFACTS, 'live-clicked.png') as `${string}.png` });
      await page.close();
    } finally {
      await b.stop();
    }
  });

  test('when the URL is typed into the address bar, then the browser goes there', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      const page = await open(b.liveViewUrl);
      await waitForState(page, 'live');
      await page.click('#url', { count: 3 });
      await page.keyboard.type(site.url('live-clock.html'));
      await page.keyboard.press('Enter');
      await b.page.waitForFunction(() => document.title === 'Live clock', { timeout: 10000, polling: 100 });
      await page.waitForFunction((want) => (document.getElementById('url') as HTMLInputElement).value === want, { timeout: 10000 }, site.url('live-clock.html'));
      await page.close();
    } finally {
      await b.stop();
    }
  });

  test('when the page is embedded in another origin, then it loads and plays in the iframe', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      const res = await fetch(b.liveViewUrl);
      assert.equal(res.headers.get('x-frame-options'), null);
      assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors \*/);
      const page = await open(site.url(`live-embed.html?src=${encodeURIComponent(b.liveViewUrl)}`));
      const frame = await (await page.waitForSelector('iframe'))!.contentFrame();
      await frame.waitForSelector('body[data-state="live"]', { timeout: 15000 });
      await page.screenshot({ path: path.join(ARTIFACTS, 'embedded.png') as `${string}.png` });
      await page.close();
    } finally {
      await b.stop();
    }
  });

  test('when the browser is stopped, then the live view says so', async () => {
    const b = await poolBrowserOn('live-button.html');
    const page = await open(b.liveViewUrl);
    await waitForState(page, 'live');
    await b.stop();
    await waitForState(page, 'ended');
    assert.match(await page.$eval('#message', (m) => m.textContent ?? ''), /stopped/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'stopped.png') as `${string}.png` });
    await page.close();
  });
});

describe('how the page looks', () => {
  test('when theme=light or ui=false is asked for, then the screenshot shows a light chrome or no chrome', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      // 800×500 has the browser's aspect ratio: without chrome the frame fills the page.
      const viewport = { width: 800, height: 500 };
      const looks: Record<string, number[]> = {};
      for (const [name, query] of [['dark', ''], ['light', '&theme=light'], ['no-ui', '&ui=false']] as const) {
        const page = await open(b.liveViewUrl + query, viewport);
        await waitForState(page, 'live');
        looks[name] = await shotPixel(page, `look-${name}`, 400, 12);
        await page.close();
      }
      assert.ok(looks.dark!.every((v) => v < 80), `dark chrome by default (got ${looks.dark})`);
      assert.ok(looks.light!.every((v) => v > 200), `light chrome with theme=light (got ${looks.light})`);
      assert.ok(near(looks['no-ui']!, RED), `with ui=false the browser's page is at the top (got ${looks['no-ui']})`);
    } finally {
      await b.stop();
    }
  });
});

/** POST /browsers/{id}/live-view-links. */
const liveViewLink = (id: string, body: unknown, key = alpha().key) =>
  f.api(`/api/v1/browsers/${id}/live-view-links`, { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('what a link allows', () => {
  test('when live view links are asked for, then only an active browser of the project gets one, within the bounds, and no token shows the project', async () => {
    const b = await poolBrowserOn('live-button.html');
    let stopped = false;
    try {
      const res = await liveViewLink(b.id, { mode: 'interactive' });
      assert.equal(res.status, 201);
      const { url, expiresAt } = (await res.json()) as { url: string; expiresAt: string };
      const lifetime = Date.parse(expiresAt) - Date.now();
      assert.ok(lifetime > 3590_000 && lifetime <= 3600_000, `an hour by default (got ${lifetime} ms)`);
      const page = await open(url);
      await waitForState(page, 'live');
      assert.equal(await page.$eval('#badge', (e) => getComputedStyle(e).display), 'none', 'an interactive link is not marked view-only');
      await page.close();

      for (const token of [new URL(url).searchParams.get('token')!, new URL(b.liveViewUrl).searchParams.get('token')!]) {
        for (const shown of [token, Buffer.from(token, 'base64url').toString('latin1')]) {
          assert.ok(!shown.includes(alpha().projectId), 'the token does not carry the project id in the clear');
        }
      }

      for (const body of [{ mode: 'watch' }, {}, { mode: 'view', expires_in_seconds: 59 }, { mode: 'view', expires_in_seconds: 604801 }, { mode: 'view', expires_in_seconds: 1.5 }, { mode: 'view', extra: true }]) {
        assert.equal((await liveViewLink(b.id, body)).status, 422, JSON.stringify(body));
      }
      assert.equal((await liveViewLink(b.id, { mode: 'view' }, f.projects.beta!.key)).status, 404, "another project's browser");
      assert.equal((await liveViewLink('brw_doesnotexist00000000000000', { mode: 'view' })).status, 404);
      await b.stop();
      stopped = true;
      const after = await liveViewLink(b.id, { mode: 'view' });
      assert.equal(after.status, 404, 'a stopped browser');
      assert.deepEqual(await after.json(), { detail: 'Browser not found' });
    } finally {
      if (!stopped) await b.stop();
    }
  });

  test('when a view-only link is minted through the API and used, then clicks reach nothing, not even sent straight to the socket', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      const res = await liveViewLink(b.id, { mode: 'view', expires_in_seconds: 600 });
      assert.equal(res.status, 201, await res.clone().text());
      const { url, expiresAt } = (await res.json()) as { url: string; expiresAt: string };
      const lifetime = Date.parse(expiresAt) - Date.now();
      assert.ok(lifetime > 590_000 && lifetime <= 600_000, `the link lives 600 s (got ${lifetime} ms)`);
      assert.equal(new URL(url).pathname, `/browsers/${b.id}`);
      const page = await open(url);
      await waitForState(page, 'live');
      assert.notEqual(await page.$eval('#badge', (e) => getComputedStyle(e).display), 'none', 'the page says it is view-only');
      const button = await onPage(page, 300, 250);
      await page.mouse.click(button.x, button.y);
      await page.screenshot({ path: path.join(ARTIFACTS, 'view-only.png') as `${string}.png` });

      // The page never sends input on a view link; a hand-made client is refused by the server.
      const ws = new WebSocket(socketOf(url));
      const replies: Record<string, string>[] = [];
      ws.on('message', (d, binary) => !binary && replies.push(JSON.parse(d.toString())));
      await once(ws, 'open');
      ws.send(JSON.stringify({ t: 'mouse', type: 'down', x: 300, y: 250, button: 'left', clicks: 1 }));
      ws.send(JSON.stringify({ t: 'mouse', type: 'up', x: 300, y: 250, button: 'left', clicks: 1 }));
      ws.send(JSON.stringify({ t: 'tab', action: 'navigate', value: site.url('live-clock.html') }));
      await new Promise<void>((resolve) => ws.on('message', () => replies.filter((r) => r.t === 'error').length === 3 && resolve()));
      assert.deepEqual([...new Set(replies.filter((r) => r.t === 'error').map((r) => r.code))], ['view_only']);
      ws.close();

      // An interactive click after them all lands first: nothing of the view link got through.
      const interactive = await open(b.liveViewUrl);
      await waitForState(interactive, 'live');
      const p = await onPage(interactive, 300, 250);
      await interactive.mouse.click(p.x, p.y);
      await b.page.waitForFunction(() => document.title.startsWith('Clicked'), { timeout: 10000 });
      assert.equal(await b.page.evaluate(() => document.title), 'Clicked 1');
      assert.equal(await b.page.evaluate(() => location.pathname), '/live-button.html');
      await Promise.all([page.close(), interactive.close()]);
    } finally {
      await b.stop();
    }
  });

  test('when the link is expired or tampered, then the page shows why and no frame is sent', async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      // A link minted two hours ago by the service's own key, with a one-minute lifetime.
      const secret = fs.readFileSync(path.join(f.dataDir, 'live-view', 'signing-secret'), 'utf8').trim();
      const past = new Signer(secret, () => Date.now() - 2 * 3600_000);
      const expired = `${new URL(b.liveViewUrl).origin}/browsers/${b.id}?token=${mintLiveViewToken(past, alpha().projectId, b.id, 'interactive', 60).token}`;
      const tampered = b.liveViewUrl.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
      for (const [name, url, shown, code] of [
        ['expired', expired, /expired/, CloseCode.tokenExpired],
        ['tampered', tampered, /not valid/, CloseCode.tokenInvalid],
      ] as const) {
        const res = await fetch(url);
        assert.equal(res.status, 403);
        const page = await open(url);
        await waitForState(page, name === 'expired' ? 'expired' : 'invalid');
        await page.waitForFunction((re) => new RegExp(re).test(document.getElementById('message')!.textContent ?? ''), { timeout: 5000 }, shown.source);
        assert.equal(await page.$eval('#screen', (c) => getComputedStyle(c).display), 'none', 'no screen is shown');
        await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) as `${string}.png` });
        await page.close();

        const ws = new WebSocket(socketOf(url));
        let frames = 0;
        ws.on('message', (_d, binary) => binary && frames++);
        const [closeCode] = await once(ws, 'close');
        assert.equal(closeCode, code);
        assert.equal(frames, 0);
      }
      const real = await open(b.liveViewUrl);
      await waitForState(real, 'live'); // the untouched link still plays
      await real.close();
    } finally {
      await b.stop();
    }
  });

  test("when a link names another project's browser, then the page shows it was not found", async () => {
    const b = await poolBrowserOn('live-button.html');
    try {
      const { url } = await liveView.api.mintLiveViewUrl({ projectId: f.projects.beta!.projectId, browserId: b.id, mode: LiveViewMode.LIVE_VIEW_MODE_INTERACTIVE, ttlSeconds: 600 });
      const page = await open(url);
      await waitForState(page, 'not_found');
      await page.close();
    } finally {
      await b.stop();
    }
  });
});
