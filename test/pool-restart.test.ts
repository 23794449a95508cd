/**
 * Browsers outlive their pool process: a browser with two tabs and a cookie, its pool process
 * killed (SIGKILL, as a crash) or stopped (SIGTERM, as a restart on the same host does), then
 * started again on the same data dir. While it is down the API answers 503 (no record is read,
 * so none reads `active` with a dead cdpUrl) and the cdpUrl refuses connections; once it is back,
 * a CDP client reconnects to the same cdpUrl and finds the same tabs, page and cookie; the
 * browser is stopped as any other and its recording is finished.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser } from 'puppeteer-core';
import { upgradeStatus } from '../services/browser-pool/src/testing/upgrade-status.js';
import { serveSite, type TestSite } from './support/site.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

interface BrowserJson {
  id: string;
  status: string;
  cdpUrl: string;
  stopReason: string | null;
}

describe('a pool process that dies or restarts', () => {
  let f: StackFixture;
  let site: TestSite;

  before(async () => {
    site = await serveSite();
    f = await startStackFixture({ projects: ['main'], env: { POOL_WARM_SIZE: '1' } });
  });
  after(async () => {
    await f?.stop();
    await site?.close();
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await f.api(`/api/v1${path}`, { method, key: f.projects.main!.key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as BrowserJson & Record<string, unknown> };
  };
  const connect = (cdpUrl: string): Promise<Browser> => puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null, protocolTimeout: 30_000 });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`when the pool process gets ${signal} and starts again, then a client reconnects to the same cdpUrl and finds its tabs, page and cookie; meanwhile the API answers 503, never active; then stop and the recording work`, async () => {
      const created = await api('POST', '/browsers', {});
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const { id, cdpUrl } = created.body;
      const first = await connect(cdpUrl);
      const [page] = await first.pages();
      await page!.goto(site.url('index.html'));
      await page!.evaluate(() => (document.cookie = 'kept=yes; max-age=3600; path=/'));
      const second = await first.newPage();
      await second.goto(site.url('extract-tables.html'));
      const cut = new Promise<void>((r) => first.once('disconnected', () => r()));

      await f.stack.kill('browser-pool', 1, signal);
      await cut;
      // Down: the record is not read at all (the API says so, with a retry), and nothing answers the cdpUrl.
      const down = await api('GET', `/browsers/${id}`);
      assert.equal(down.status, 503, JSON.stringify(down.body));
      await assert.rejects(upgradeStatus(cdpUrl), /ECONNREFUSED/);

      // Reads go on while it starts again: each answers 503 or a browser whose cdpUrl is accepted.
      let revived = false;
      const reviving = f.stack.revive('browser-pool').finally(() => (revived = true));
      const seen = new Set<string>();
      while (!revived) {
        const r = await api('GET', `/browsers/${id}`);
        if (r.status === 200 && r.body.status === 'active') assert.equal(await upgradeStatus(r.body.cdpUrl), 101, 'an active record has a cdpUrl that answers');
        seen.add(r.status === 200 ? `200 ${r.body.status}` : String(r.status));
        await new Promise((res) => setTimeout(res, 200));
      }
      await reviving;
      assert.ok(!seen.has('200 stopped'), `the browser was never recorded stopped: ${[...seen].join(', ')}`);

      const back = await api('GET', `/browsers/${id}`);
      assert.equal(back.body.status, 'active');
      const again = await connect(cdpUrl);
      try {
        const pages = await again.pages();
        assert.deepEqual(pages.map((p) => p.url()).sort(), [site.url('extract-tables.html'), site.url('index.html')].sort(), 'both tabs, at their pages');
        const home = pages.find((p) => p.url() === site.url('index.html'))!;
        assert.equal(await home.evaluate(() => document.title), 'Fixture home');
        assert.match(await home.evaluate(() => document.cookie), /(^|; )kept=yes(;|$)/, 'the cookie is still there');
        await home.goto(site.url('index.html'));
        assert.equal(await home.evaluate(() => document.title), 'Fixture home', 'the browser still reaches the network (its egress proxy is back)');
      } finally {
        await again.disconnect();
      }

      const stopped = await api('POST', `/browsers/${id}/stop`);
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
      assert.deepEqual([stopped.body.status, stopped.body.stopReason], ['stopped', 'user']);
      const link = await until(
        async () => {
          const res = await f.api(`/api/v1/browsers/${id}/recording`, { key: f.projects.main!.key });
          const text = await res.text();
          assert.ok(res.status === 200 || res.status === 409, `recording ${res.status} ${text}`);
          return res.status === 200 && (JSON.parse(text) as { url: string }).url;
        },
        { timeoutMs: 60_000, intervalMs: 250, what: `the recording of ${id}` },
      );
      assert.match(link, /^http/);
    });
  }
});
