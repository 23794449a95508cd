/**
 * What the client tests (Python SDK, TypeScript SDK, CLI, MCP) run against: one real stack, the
 * test site, a TCP proxy in front of the gateway whose connections the test can cut, and a
 * small control server through which a client test in another process (pytest, the CLI) asks
 * the harness to cut connections or to stop and start the gateway.
 *
 * A client test process gets everything in `env`:
 * - `ATS_BASE_URL` (through the proxy), `ATS_API_KEY` — as a user sets them;
 * - `ATS_TEST_DIRECT_URL` — the gateway without the proxy;
 * - `ATS_TEST_OTHER_KEY` — a key of another project (its resources are 404 to the first);
 * - `ATS_TEST_SITE` — the test site's base URL (`${ATS_TEST_SITE}/run-table.html`);
 * - `ATS_TEST_CONTROL` — `POST /cut` ends every open proxied connection (`{"cut": n}`);
 *   `POST /gateway/stop` kills the gateway (SIGKILL, as a crash); `POST /gateway/start` starts it
 *   again on the same port and answers once it listens.
 */
import http from 'node:http';
import net from 'node:net';
import { serveSite, type TestSite } from './site.js';
import { startStackFixture, type StackFixture, type StackFixtureOptions } from './stack-fixture.js';

export interface ClientHarness {
  fixture: StackFixture;
  site: TestSite;
  /** The gateway's base URL through the cutting proxy. */
  proxyUrl: string;
  controlUrl: string;
  /** The environment of a client test process (see the module comment). */
  env: Record<string, string>;
  /** Ends every open connection through the proxy; returns how many. */
  cut(): number;
  stop(): Promise<void>;
}

/** A TCP proxy to `port` on loopback that can end every connection it carries. */
async function cuttingProxy(port: () => number): Promise<{ port: number; cut(): number; close(): Promise<void> }> {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port(), '127.0.0.1');
    const pair = [client, upstream];
    for (const s of pair) {
      open.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        open.delete(s);
        for (const other of pair) other.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      const n = [...open].length / 2;
      for (const s of open) s.destroy();
      return Math.ceil(n);
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

export async function startClientHarness(options: StackFixtureOptions = {}): Promise<ClientHarness> {
  const site = await serveSite();
  const fixture = await startStackFixture({ ...options, projects: [...(options.projects ?? []), 'client-other'] }).catch(async (err) => {
    await site.close();
    throw err;
  });
  // From here on a failure must not leave the stack (its processes and Chromium) behind.
  try {
    return await withStack(fixture, site);
  } catch (err) {
    await fixture.stop();
    await site.close();
    throw err;
  }
}

/** The proxy and control server around a started stack (see startClientHarness). */
async function withStack(fixture: StackFixture, site: TestSite): Promise<ClientHarness> {
  const proxy = await cuttingProxy(() => fixture.stack.gatewayPort);
  const control = http.createServer((req, res): void => {
    const reply = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'POST') return reply(405, { detail: 'POST only' });
    const act: Record<string, () => Promise<unknown>> = {
      '/cut': async () => ({ cut: proxy.cut() }),
      '/gateway/stop': async () => {
        await fixture.stack.kill('gateway');
        return { gateway: 'stopped' };
      },
      '/gateway/start': async () => {
        await fixture.stack.startService('gateway');
        return { gateway: 'started' };
      },
    };
    const fn = act[req.url ?? ''];
    if (!fn) return reply(404, { detail: 'unknown control' });
    fn().then(
      (body) => reply(200, body),
      (err: Error) => reply(500, { detail: err.message }),
    );
  });
  await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
  const controlUrl = `http://127.0.0.1:${(control.address() as net.AddressInfo).port}`;
  const proxyUrl = `http://127.0.0.1:${proxy.port}`;
  const siteBase = site.url('').replace(/\/$/, '');
  return {
    fixture,
    site,
    proxyUrl,
    controlUrl,
    env: {
      ATS_BASE_URL: proxyUrl,
      ATS_API_KEY: fixture.key,
      ATS_TEST_DIRECT_URL: fixture.stack.baseUrl,
      ATS_TEST_OTHER_KEY: fixture.projects['client-other']!.key,
      ATS_TEST_SITE: siteBase,
      ATS_TEST_CONTROL: controlUrl,
    },
    cut: () => proxy.cut(),
    async stop() {
      control.closeAllConnections();
      await new Promise<void>((r) => control.close(() => r()));
      await proxy.close();
      await fixture.stop();
      await site.close();
    },
  };
}
