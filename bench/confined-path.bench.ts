/**
 * What the confined path costs per request, in-process and alternating so both sides meet the
 * same load: (1) a plain-http GET of a local page straight vs through a browser's egress proxy,
 * with its name lookup cached (the default) and looked up every time (the old way); (2) a CDP
 * round trip answering a 1 MiB string, sent by the pool itself vs relayed for a client channel
 * (whose answers are passed on by editing their text, not re-encoded).
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createLogger } from '../services/common/src/logger.js';
import { Chromium } from '../services/browser-pool/src/chromium.js';
import type { CdpMessage } from '../services/browser-pool/src/cdp-connection.js';
import { EgressProxy } from '../services/browser-pool/src/egress-proxy.js';
import { hostConfinement } from '../services/browser-pool/src/testing/confinement.js';
import { startFixtureSite } from '../services/browser-pool/src/testing/fixture-site.js';
import { ms, stats, type Stats } from './browser-pool.bench.js';
import { defaultChromiumPath } from '../services/browser-pool/src/config.js';

export interface ConfinedPathFigures {
  /** One GET, µs p50: straight to the site, through the proxy (lookup cached), through it looking up each time. */
  egress: { directUs: Stats; proxiedUs: Stats; proxiedNoDnsCacheUs: Stats; overheadUs: number; overheadNoDnsCacheUs: number };
  /** One CDP command answering 1 MiB, ms p50: the pool's own vs a client's relayed. */
  cdp: { directMs: Stats; relayedMs: Stats; overheadMs: number };
}

const logger = createLogger('bench', 'silent');

/** GET `url` with a fresh connection each time (Chromium's per-request path through a proxy is one request on a kept-alive socket; this keeps both sides alike). */
function get(url: string, proxyPort?: number): Promise<void> {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const opts = proxyPort ? { host: '127.0.0.1', port: proxyPort, path: url, headers: { host: u.host }, agent } : { host: u.hostname, port: u.port, path: u.pathname, agent };
  return new Promise((resolve, reject) => {
    http
      .get(opts, (res) => {
        res.resume();
        res.on('end', () => {
          agent.destroy();
          if (res.statusCode === 200) resolve();
          else reject(new Error(`status ${res.statusCode}`));
        });
      })
      .on('error', reject);
  });
}

async function egressBench(rounds: number): Promise<ConfinedPathFigures['egress']> {
  const site = await startFixtureSite();
  const policy = { allowPrivateNetworks: true, deniedLocalPorts: new Set<number>() };
  const cached = await EgressProxy.start({ policy, logger });
  const uncached = await EgressProxy.start({ policy, logger, dnsCacheMs: 0 });
  const url = `http://localhost:${new URL(site.origin).port}/index.html`;
  const times = { direct: [] as number[], proxied: [] as number[], uncached: [] as number[] };
  try {
    for (let i = 0; i < rounds; i++) {
      for (const [k, port] of [['direct', undefined], ['proxied', cached.port], ['uncached', uncached.port]] as const) {
        const t0 = process.hrtime.bigint();
        await get(url, port);
        times[k].push(ms(t0) * 1000);
      }
    }
  } finally {
    await cached.stop();
    await uncached.stop();
    await site.close();
  }
  const [d, p, u] = [stats(times.direct), stats(times.proxied), stats(times.uncached)];
  return { directUs: d, proxiedUs: p, proxiedNoDnsCacheUs: u, overheadUs: Math.round(p.p50 - d.p50), overheadNoDnsCacheUs: Math.round(u.p50 - d.p50) };
}

async function cdpBench(rounds: number): Promise<ConfinedPathFigures['cdp']> {
  const root = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'bench-cdp-'));
  const chromium = await Chromium.launch({ executable: defaultChromiumPath(), rootDir: path.join(root, 'browsers'), id: 'brw_benchcdp', width: 800, height: 600, confinement: hostConfinement(), logger });
  const waiters = new Map<number, () => void>();
  try {
    const { targetInfos } = await chromium.conn.send<{ targetInfos: { targetId: string; type: string }[] }>('Target.getTargets');
    const page = targetInfos.find((t) => t.type === 'page')!;
    const { sessionId } = await chromium.conn.send<{ sessionId: string }>('Target.attachToTarget', { targetId: page.targetId, flatten: true });
    // A client rooted at the same page, as /devtools/page/{id} is: its answers come through the relay.
    const channel = await chromium.conn.openChannel(
      page.targetId,
      (text) => {
        const m = JSON.parse(text) as CdpMessage;
        if (m.id !== undefined) waiters.get(m.id)?.();
      },
      (msg) => ({ send: msg }),
    );
    const params = { expression: "'x'.repeat(1 << 20)", returnByValue: true };
    const times = { direct: [] as number[], relayed: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      let t0 = process.hrtime.bigint();
      await chromium.conn.send('Runtime.evaluate', params, sessionId);
      times.direct.push(ms(t0));
      t0 = process.hrtime.bigint();
      await new Promise<void>((resolve) => {
        waiters.set(i, resolve);
        channel.send(JSON.stringify({ id: i, method: 'Runtime.evaluate', params }));
      });
      times.relayed.push(ms(t0));
    }
    const [d, r] = [stats(times.direct), stats(times.relayed)];
    return { directMs: d, relayedMs: r, overheadMs: Math.round((r.p50 - d.p50) * 10) / 10 };
  } finally {
    await chromium.stop();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

/** Runs both; `make bench` (BENCH_ONLY=confined-path) prints them. */
export async function confinedPathBench(rounds: number): Promise<ConfinedPathFigures> {
  return { egress: await egressBench(rounds), cdp: await cdpBench(Math.max(10, Math.ceil(rounds / 10))) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${JSON.stringify(await confinedPathBench(Number(process.env.BENCH_ROUNDS ?? 200)), null, 2)}\n`);
}
