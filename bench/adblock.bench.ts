/**
 * block_ads on an ad-heavy page (issue 24): one news page with 20 paragraphs, 8 ad slots and 16
 * ad and tracker requests to hosts of EasyList and EasyPrivacy (ad.doubleclick.net,
 * pagead2.googlesyndication.com, securepubads.g.doubleclick.net, www.googletagmanager.com), all
 * served by one local server that the browsers' egress proxies resolve those names to. Each ad
 * or tracker answer is 30 KB after 40 ms (a stand-in for a remote ad server; the page's own
 * answers have no delay). Two browsers launched as the pool launches them, one blocking and one
 * not, load the page alternately: time from navigation to the load event, the requests and bytes
 * the server sent, and the observation the agent would read (its serialization of the page, the
 * same page function) with and without the lists' hiding rules.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createLogger } from '../services/common/src/logger.js';
import { AdBlocker } from '../services/browser-pool/src/adblock.js';
import { LiveBrowser } from '../services/browser-pool/src/live-browser.js';
import { hostConfinement } from '../services/browser-pool/src/testing/confinement.js';
import { snapshotFrame } from '../services/run/src/agents/observe.page.js';
import { ms, stats, type Stats } from './browser-pool.bench.js';
import { defaultChromiumPath } from '../services/browser-pool/src/config.js';

export interface AdblockFigures {
  rounds: number;
  loadMs: { blocking: Stats; plain: Stats; ratio: number };
  /** Per page load, as the server counted them. */
  requests: { blocking: number; plain: number };
  bytes: { blocking: number; plain: number };
  /** Characters of the agent's page serialization, and its indexed elements. */
  observation: { blocking: { chars: number; elements: number }; plain: { chars: number; elements: number } };
  /** Of the page's 8 ad slots, how many the lists hid. */
  hiddenSlots: { blocking: number; plain: number };
  /** Seconds to parse EasyList and EasyPrivacy (0 when the engine came from the cache). */
  listLoadMs: number;
}

const AD_HOSTS = ['ad.doubleclick.net', 'pagead2.googlesyndication.com', 'securepubads.g.doubleclick.net', 'www.googletagmanager.com'];
const NAMES = new Set(['news.example.org', ...AD_HOSTS]);
const AD_BYTES = 30 * 1024;
const AD_DELAY_MS = 40;

function newsPage(port: number): string {
  const p = (i: number) => `<p>Paragraph ${i} of the report: the council met on Tuesday and approved the budget for the new bridge, the library and the parks.</p>`;
  // Each slot carries a class or id that a generic EasyList hiding rule names (###ad_banner, ##AD-SLOT, ##.top-ad, …).
  const slots = [
    '<div id="ad_banner">Advertisement: holidays from 99 €</div>',
    '<div class="adsbygoogle-box">Advertisement: new phones</div>',
    '<ad-slot>Sponsored: cheap loans today</ad-slot>',
    '<div class="banner-ad">Advertisement: cars</div>',
    '<div id="ad--sidebar">Advertisement: shoes</div>',
    '<div class="top-ad">Advertisement: insurance</div>',
    '<div class="google-ad">Sponsored: diets</div>',
    '<aside class="ad-slot--top"><a href="https://ad.doubleclick.net/click">Advertisement: watches</a></aside>',
  ];
  const requests: string[] = [];
  for (let i = 0; i < 16; i++) {
    const host = AD_HOSTS[i % AD_HOSTS.length]!;
    requests.push(host === 'www.googletagmanager.com' ? `<script async src="http://${host}:${port}/gtm-${i}.js"></script>` : `<img src="http://${host}:${port}/ad-${i}.gif" width="1" height="1">`);
  }
  const body: string[] = [];
  for (let i = 0; i < 20; i++) {
    body.push(p(i));
    if (i % 2 === 1 && slots.length) body.push(slots.shift()!);
  }
  return `<!doctype html><html><head><meta charset="utf-8"><title>Local news</title></head><body><h1>Local news</h1><img src="/own.gif" width="1" height="1">${body.join('\n')}${requests.join('\n')}</body></html>`;
}

async function serve(): Promise<{ port: number; count: { requests: number; bytes: number }; close(): Promise<void> }> {
  const count = { requests: 0, bytes: 0 };
  let port = 0;
  const server = http.createServer((req, res) => {
    const host = (req.headers.host ?? '').split(':')[0]!;
    count.requests++;
    const send = (type: string, body: Buffer | string) => {
      const b = typeof body === 'string' ? Buffer.from(body) : body;
      count.bytes += b.length;
      res.writeHead(200, { 'Content-Type': type, 'Content-Length': b.length, 'Cache-Control': 'no-store' }).end(b);
    };
    if (AD_HOSTS.includes(host)) {
      setTimeout(() => send(req.url?.endsWith('.js') ? 'text/javascript' : 'image/gif', Buffer.alloc(AD_BYTES, 32)), AD_DELAY_MS);
      return;
    }
    if (req.url === '/news.html') return send('text/html; charset=utf-8', newsPage(port));
    send('image/gif', Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  return {
    port,
    count,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

export async function adblockBench(rounds: number): Promise<AdblockFigures> {
  const t0 = process.hrtime.bigint();
  const blocker = await AdBlocker.load();
  const listLoadMs = ms(t0);
  const site = await serve();
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'bench-adblock-'));
  const launch = (id: string) =>
    LiveBrowser.launch({
      executable: defaultChromiumPath(),
      rootDir: dir,
      id,
      stealth: true,
      width: 1280,
      height: 800,
      confinement: hostConfinement(),
      egress: { allowPrivateNetworks: true, deniedLocalPorts: new Set() },
      egressLookup: async (name) => (NAMES.has(name) ? [{ address: '127.0.0.1', family: 4 }] : []),
      logger: createLogger('bench', 'silent'),
      screencast: { quality: 60, everyNthFrame: 1, maxWidth: 0, maxHeight: 0 },
    });
  const browsers = { blocking: await launch('brw_benchads1'), plain: await launch('brw_benchads2') };
  const times = { blocking: [] as number[], plain: [] as number[] };
  const sent = { blocking: { requests: 0, bytes: 0 }, plain: { requests: 0, bytes: 0 } };
  const observation = { blocking: { chars: 0, elements: 0 }, plain: { chars: 0, elements: 0 } };
  const hiddenSlots = { blocking: 0, plain: 0 };
  try {
    browsers.blocking.egress.setBlocker(blocker);
    await browsers.blocking.present({ hardware: { hardwareConcurrency: 8 }, locale: 'en-US', timezone: 'UTC' }, blocker);
    await browsers.plain.present({ hardware: { hardwareConcurrency: 8 }, locale: 'en-US', timezone: 'UTC' });
    const url = `http://news.example.org:${site.port}/news.html`;
    for (let i = 0; i < rounds * 2; i++) {
      const mode = i % 2 === 0 ? 'blocking' : 'plain';
      const b = browsers[mode];
      const conn = b.chromium.conn;
      const sessionId = await b.tabs.session(b.tabs.activeId!);
      await conn.send('Page.enable', {}, sessionId);
      await conn.send('Page.setLifecycleEventsEnabled', { enabled: true }, sessionId);
      const before = { ...site.count };
      const loaded = conn.waitFor('Page.loadEventFired', (_p, s) => s === sessionId, 30000);
      const start = process.hrtime.bigint();
      const { loaderId } = await conn.send<{ loaderId: string }>('Page.navigate', { url }, sessionId);
      const quiet = conn.waitFor<{ name: string; loaderId: string }>('Page.lifecycleEvent', (p, s) => s === sessionId && p.name === 'networkIdle' && p.loaderId === loaderId, 30000);
      await loaded;
      times[mode].push(ms(start));
      // Late requests (async scripts) are counted once the page's network is idle.
      await quiet;
      sent[mode] = { requests: site.count.requests - before.requests, bytes: site.count.bytes - before.bytes };
      // The hiding stylesheet is added at DOMContentLoaded beside the page; read the page once it holds.
      const evaluate = async <T>(expression: string): Promise<T> => (await conn.send<{ result: { value: T } }>('Runtime.evaluate', { expression, returnByValue: true }, sessionId)).result.value;
      if (mode === 'blocking') {
        for (let k = 0; k < 100 && (await evaluate<string>(`getComputedStyle(document.getElementById('ad_banner')).display`)) !== 'none'; k++) await new Promise((r) => setTimeout(r, 20));
      }
      const snap = await evaluate<{ lines: unknown[]; elements: unknown[] }>(`(() => { const __name = (f) => f; return (${snapshotFrame.toString()})({ next: 1, screens: 100 }); })()`);
      observation[mode] = { chars: JSON.stringify(snap.lines).length, elements: snap.elements.length };
      hiddenSlots[mode] = await evaluate<number>(`[...document.body.querySelectorAll('div, ins, ad-slot, aside')].filter((e) => /Advertisement|Sponsored/.test(e.textContent) && getComputedStyle(e).display === 'none').length`);
    }
  } finally {
    await Promise.all(Object.values(browsers).map(async (b) => (await b.shutdown(), await b.chromium.removed)));
    fs.rmSync(dir, { recursive: true, force: true });
    await site.close();
  }
  const blocking = stats(times.blocking);
  const plain = stats(times.plain);
  return {
    rounds,
    loadMs: { blocking, plain, ratio: blocking.p50 / plain.p50 },
    requests: { blocking: sent.blocking.requests, plain: sent.plain.requests },
    bytes: { blocking: sent.blocking.bytes, plain: sent.plain.bytes },
    observation,
    hiddenSlots,
    listLoadMs,
  };
}
