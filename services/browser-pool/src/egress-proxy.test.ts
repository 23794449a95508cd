/** The egress proxy over real sockets: what a page may reach, what it is refused, and chaining through an upstream proxy. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { createLogger } from '../../common/src/logger.js';
import { AdBlocker, requestType } from './adblock.js';
import { EGRESS_FAILURE_HEADER } from './client/egress.js';
import { cachedLookup, EgressProxy, hostAddresses, refusal, type EgressPolicy, type LookupAll } from './egress-proxy.js';
import { TEST_CHROMIUM_ARGS } from '../../../test/support/test-chromium.js';
import { within } from '../../../test/support/until.js';

const logger = createLogger('test', process.env.EGRESS_TEST_LOG ?? 'silent');
const NO_OWN = new Set<string>();
const dev = (ports: number[] = [5432, 50051]): EgressPolicy => ({ allowPrivateNetworks: true, deniedLocalPorts: new Set(ports) });
const prod = (ports: number[] = [5432, 50051]): EgressPolicy => ({ allowPrivateNetworks: false, deniedLocalPorts: new Set(ports) });

// ---- helpers: sites, and a client that talks to a proxy ----

interface Site {
  port: number;
  hits: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[];
  close(): Promise<void>;
}

/** An HTTP server on `host` (default '::', both stacks) that says which site it is and echoes what it got. */
async function startSite(name: string, host = '::', port = 0): Promise<Site> {
  const hits: Site['hits'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      hits.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.writeHead(200, { 'Content-Type': 'text/html', 'Set-Cookie': ['a=1', 'b=2'], Connection: 'keep-alive', 'Keep-Alive': 'timeout=5' });
      res.end(`<title>${name}</title>${req.method} ${req.url} ${body}`);
    });
  });
  server.listen(port, host);
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An absolute-URI request to the proxy, as Chromium sends plain http. */
function viaProxy(proxyPort: number, url: string, o: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: o.method ?? 'GET', path: url, headers: { Host: new URL(url).host, ...o.headers }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** CONNECT authority through the proxy; when the tunnel opens, a GET / over it. */
function tunnel(proxyPort: number, authority: string): Promise<{ status: number; page?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: authority, agent: false });
    req.on('error', reject);
    req.on('connect', (res: http.IncomingMessage, socket: net.Socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        return resolve({ status: res.statusCode! });
      }
      const get = http.get({ createConnection: () => socket, path: '/through-tunnel', headers: { Host: authority } }, (r) => {
        let page = '';
        r.on('data', (c) => (page += c));
        r.on('end', () => {
          socket.destroy();
          resolve({ status: 200, page });
        });
      });
      get.on('error', reject);
    });
    req.end();
  });
}

const proxies: EgressProxy[] = [];
async function egress(policy: EgressPolicy, o: { lookup?: LookupAll; upstream?: URL } = {}): Promise<EgressProxy> {
  const p = await EgressProxy.start({ policy, logger, ...o });
  proxies.push(p);
  return p;
}
after(async () => {
  await Promise.all(proxies.map((p) => p.stop()));
});

// ---- refusal (pure) ----

describe('refusal', () => {
  test('when the destination is link-local, unspecified, multicast, broadcast or a metadata name, then it is refused even in development', () => {
    for (const [addr, reason] of [
      ['169.254.169.254', /link-local/],
      ['169.254.0.1', /link-local/],
      ['fe80::1', /link-local/],
      ['[fe80::1]', /link-local/],
      ['FE80::abcd', /link-local/],
      ['0.0.0.0', /unspecified/],
      ['0.1.2.3', /unspecified/],
      ['0', /unspecified/],
      ['::', /unspecified/],
      ['[::]', /unspecified/],
      ['224.0.0.1', /multicast/],
      ['239.255.255.250', /multicast/],
      ['ff02::1', /multicast/],
      ['255.255.255.255', /broadcast/],
      ['240.0.0.1', /reserved/],
      ['::ffff:169.254.169.254', /IPv4-mapped link-local/],
      ['[::ffff:a9fe:a9fe]', /IPv4-mapped link-local/],
      ['::ffff:0.0.0.0', /IPv4-mapped unspecified/],
      ['::169.254.169.254', /IPv4-compatible link-local/],
      ['64:ff9b::a9fe:a9fe', /NAT64 link-local/],
      ['2002:a9fe:a9fe::1', /6to4 link-local/],
      ['0xa9.0xfe.0xa9.0xfe', /link-local/],
      ['2852039166', /link-local/],
      ['metadata.google.internal', /metadata host name/],
      ['METADATA.google.internal.', /metadata host name/],
      ['100.100.100.200', /metadata/],
      ['fd00:ec2::254', /metadata/],
    ] as const) {
      assert.match(refusal(addr, 80, dev(), NO_OWN) ?? 'allowed', reason, addr);
    }
  });

  test('when private networks are refused, then loopback, private ranges, ULA and this host are refused in every spelling', () => {
    const own = new Set(['203.0.113.7']);
    for (const [addr, reason] of [
      ['127.0.0.1', /^loopback/],
      ['127.8.9.10', /^loopback/],
      ['::1', /^loopback/],
      ['[::1]', /^loopback/],
      ['0:0:0:0:0:0:0:1', /^loopback/],
      ['localhost', /^loopback/],
      ['LocalHost.', /^loopback/],
      ['app.localhost', /^loopback/],
      ['2130706433', /^loopback/],
      ['0x7f.1', /^loopback/],
      ['0177.0.0.1', /^loopback/],
      ['127.1', /^loopback/],
      ['0x7f000001', /^loopback/],
      ['::ffff:127.0.0.1', /IPv4-mapped loopback/],
      ['::ffff:7f00:1', /IPv4-mapped loopback/],
      ['10.1.2.3', /private network/],
      ['172.16.0.1', /private network/],
      ['172.31.255.255', /private network/],
      ['192.168.1.1', /private network/],
      ['100.64.0.1', /private network/],
      ['100.127.255.254', /private network/],
      ['::ffff:10.0.0.1', /IPv4-mapped private network/],
      ['fc00::1', /private network/],
      ['fd12:3456::1', /private network/],
      ['203.0.113.7', /own address/],
      ['::ffff:203.0.113.7', /own address/],
    ] as const) {
      assert.match(refusal(addr, 8080, prod(), own) ?? 'allowed', reason, addr);
    }
    for (const addr of ['93.184.216.34', '172.32.0.1', '100.128.0.1', '192.169.0.1', '2606:4700::1111', 'example.com', '11.0.0.1']) {
      assert.equal(refusal(addr, 443, prod(), own), undefined, addr);
    }
  });

  test("when private networks are allowed, then loopback and this host are reachable except on the services' ports", () => {
    const own = new Set(['203.0.113.7']);
    const policy = dev([5432, 50051]);
    for (const addr of ['127.0.0.1', 'localhost', '::1', '2130706433', '0x7f.1', '::ffff:127.0.0.1', '203.0.113.7', '10.0.0.5', 'fd00::5']) {
      assert.equal(refusal(addr, 8080, policy, own), undefined, addr);
    }
    for (const addr of ['127.0.0.1', 'localhost', '[::1]', '2130706433', '0x7f.1', '127.0.0.53', '::ffff:127.0.0.1', '203.0.113.7']) {
      assert.equal(refusal(addr, 5432, policy, own), 'internal service port 5432', addr);
    }
    // Another machine's Postgres is not a local port: deniedEndpoints covers it.
    assert.equal(refusal('10.0.0.5', 5432, policy, own), undefined);
  });

  test('when the denied ports are a live set, then each check sees its current members', () => {
    const ports = new Set<number>();
    const policy: EgressPolicy = { allowPrivateNetworks: true, deniedLocalPorts: ports };
    assert.equal(refusal('127.0.0.1', 41000, policy, NO_OWN), undefined);
    ports.add(41000);
    assert.equal(refusal('127.0.0.1', 41000, policy, NO_OWN), 'internal service port 41000');
  });

  test('when an endpoint is denied, then it is refused by name and by any spelling of its address, and only on its port', () => {
    const policy: EgressPolicy = { ...dev(), deniedEndpoints: [{ host: 'db.internal', port: 5432 }, { host: '10.0.0.9', port: 6379 }] };
    assert.equal(refusal('DB.internal', 5432, policy, NO_OWN), 'denied endpoint');
    assert.equal(refusal('db.internal', 80, policy, NO_OWN), undefined);
    assert.equal(refusal('10.0.0.9', 6379, policy, NO_OWN), 'denied endpoint');
    assert.equal(refusal('::ffff:10.0.0.9', 6379, policy, NO_OWN), 'denied endpoint');
    assert.equal(refusal('167772169', 6379, policy, NO_OWN), 'denied endpoint');
  });

  test('when a host or port is malformed, then it is refused', () => {
    for (const addr of ['', 'a b', 'user@127.0.0.1', '127.0.0.1/x', '[::1', '%31%32%37.0.0.1', '256.0.0.1', '[fe80::1%25eth0]']) {
      assert.notEqual(refusal(addr, 80, dev(), NO_OWN), undefined, addr);
    }
    assert.equal(refusal('example.com', 0, dev(), NO_OWN), 'invalid port');
    assert.equal(refusal('example.com', 65536, dev(), NO_OWN), 'invalid port');
  });
});

// ---- through the proxy, real sockets ----

describe('through the proxy', () => {
  let site: Site;
  let denied: Site;
  before(async () => {
    site = await startSite('allowed');
    denied = await startSite('internal');
  });
  after(async () => {
    await site.close();
    await denied.close();
  });

  test('when a page fetches an allowed loopback site over plain http, then it gets the page, with its body and multiple cookies, and no proxy headers reach the site', async () => {
    const p = await egress(dev([denied.port]));
    const r = await viaProxy(p.port, `http://127.0.0.1:${site.port}/form?q=1`, {
      method: 'POST',
      body: 'x=1&y=2',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Proxy-Authorization': 'Basic c2VjcmV0', 'Proxy-Connection': 'keep-alive', 'X-Keep': 'me', Connection: 'X-Drop', 'X-Drop': 'hop' },
    });
    assert.equal(r.status, 200);
    assert.match(r.body, /<title>allowed<\/title>POST \/form\?q=1 x=1&y=2/);
    assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2']);
    assert.notEqual(r.headers['keep-alive'], 'timeout=5', 'hop-by-hop headers of the site do not reach the browser');
    const hit = site.hits.at(-1)!;
    assert.equal(hit.url, '/form?q=1', 'the site gets an origin-form request');
    assert.equal(hit.headers['x-keep'], 'me');
    assert.equal(hit.headers['proxy-authorization'], undefined);
    assert.equal(hit.headers['proxy-connection'], undefined);
    assert.equal(hit.headers['x-drop'], undefined, 'headers named in Connection are hop-by-hop');
    assert.equal(hit.headers.host, `127.0.0.1:${site.port}`);
  });

  test('when a page opens a tunnel to an allowed loopback site, then bytes flow both ways', async () => {
    const p = await egress(dev([denied.port]));
    const r = await tunnel(p.port, `127.0.0.1:${site.port}`);
    assert.equal(r.status, 200);
    assert.match(r.page!, /<title>allowed<\/title>GET \/through-tunnel/);
    assert.equal((await tunnel(p.port, `[::1]:${site.port}`)).status, 200);
    assert.equal((await tunnel(p.port, `localhost:${site.port}`)).status, 200);
  });

  test("when a page asks for a service's port on loopback in any spelling, then it gets 403 saying why and the service sees nothing", async () => {
    const p = await egress(dev([denied.port]));
    const before = denied.hits.length;
    for (const host of ['127.0.0.1', 'localhost', '[::1]', '2130706433', '0x7f.1', '127.1', '[::ffff:127.0.0.1]']) {
      const r = await viaProxy(p.port, `http://${host}:${denied.port}/secret`);
      assert.equal(r.status, 403, host);
      assert.match(r.headers['content-type']!, /text\/html/);
      assert.match(r.body, new RegExp(`Blocked by the browser network policy: internal service port ${denied.port}`), host);
      assert.equal((await tunnel(p.port, `${host}:${denied.port}`)).status, 403, `CONNECT ${host}`);
    }
    const zero = await viaProxy(p.port, `http://0.0.0.0:${denied.port}/`);
    assert.equal(zero.status, 403);
    assert.match(zero.body, /unspecified address/);
    assert.equal((await tunnel(p.port, `0.0.0.0:${site.port}`)).status, 403, '0.0.0.0 reaches localhost on Linux: refused whatever the port');
    assert.equal(denied.hits.length, before);
  });

  test('when a page asks for cloud metadata, then it is refused before any connection', async () => {
    const p = await egress(dev());
    const r = await viaProxy(p.port, 'http://169.254.169.254/latest/meta-data/');
    assert.equal(r.status, 403);
    assert.match(r.body, /link-local address \(cloud metadata\)/);
    assert.equal((await tunnel(p.port, '169.254.169.254:443')).status, 403);
    assert.equal((await tunnel(p.port, '[fe80::1]:443')).status, 403);
    assert.equal((await viaProxy(p.port, 'http://metadata.google.internal/computeMetadata/v1/')).status, 403);
  });

  test('when private networks are refused, then an allowed-port loopback site is refused too', async () => {
    const p = await egress(prod([]));
    const before = site.hits.length;
    const r = await viaProxy(p.port, `http://127.0.0.1:${site.port}/`);
    assert.equal(r.status, 403);
    assert.match(r.body, /Blocked by the browser network policy: loopback address/);
    assert.equal((await tunnel(p.port, `localhost:${site.port}`)).status, 403);
    assert.equal(site.hits.length, before);
  });

  test("when this host's own interface address is used, then it is refused in production and its service ports are refused in development", async (t) => {
    const own = [...hostAddresses()].find((a) => net.isIPv4(a) && !a.startsWith('127.'));
    if (!own) return t.skip('no non-loopback IPv4 interface');
    assert.equal((await viaProxy((await egress(prod([]))).port, `http://${own}:${site.port}/`)).status, 403);
    const d = await egress(dev([denied.port]));
    assert.equal((await viaProxy(d.port, `http://${own}:${denied.port}/`)).status, 403);
    assert.equal((await viaProxy(d.port, `http://${own}:${site.port}/`)).status, 200);
  });

  test('when a name resolves to loopback, then the resolved address is checked (and the connection goes to it)', async () => {
    const asked: string[] = [];
    const lookup: LookupAll = async (h) => {
      asked.push(h);
      if (h === 'intranet.test') return [{ address: '127.0.0.1', family: 4 }];
      if (h === 'mixed.test') return [{ address: '93.184.216.34', family: 4 }, { address: '169.254.169.254', family: 4 }];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    const p = await egress(dev([denied.port]), { lookup });
    const ok = await viaProxy(p.port, `http://intranet.test:${site.port}/named`);
    assert.equal(ok.status, 200);
    assert.equal(site.hits.at(-1)!.headers.host, `intranet.test:${site.port}`, 'the site gets the name in Host, the socket went to the checked address');
    assert.equal((await tunnel(p.port, `intranet.test:${site.port}`)).status, 200);
    const no = await viaProxy(p.port, `http://intranet.test:${denied.port}/`);
    assert.equal(no.status, 403);
    assert.match(no.body, /internal service port/);
    const mixed = await viaProxy(p.port, 'http://mixed.test/');
    assert.equal(mixed.status, 403, 'one refused address among several refuses the name');
    assert.match(mixed.body, /link-local/);
    assert.equal((await viaProxy(p.port, 'http://nowhere.test/')).status, 502);
    assert.deepEqual(asked.filter((h) => h === 'intranet.test').length, 1, 'one resolution within the DNS cache span: the checked answer is the one used');
    assert.deepEqual(asked.filter((h) => h === 'nowhere.test').length, 1);
    assert.equal((await viaProxy(p.port, 'http://nowhere.test/')).status, 502);
    assert.deepEqual(asked.filter((h) => h === 'nowhere.test').length, 2, 'a failed resolution is not kept');
    const prodProxy = await egress(prod([]), { lookup });
    assert.equal((await tunnel(prodProxy.port, `intranet.test:${site.port}`)).status, 403);
  });

  test('when a name was resolved less than the cache span ago, then its answer is reused; after it, the name is resolved again', async () => {
    let at = 0;
    let answer = '10.0.0.1';
    const asked: string[] = [];
    const lookup = cachedLookup(async (h) => (asked.push(h), [{ address: answer, family: 4 }]), 1000, () => at);
    assert.deepEqual(await Promise.all([lookup('a.test'), lookup('a.test')]), [[{ address: '10.0.0.1', family: 4 }], [{ address: '10.0.0.1', family: 4 }]]);
    answer = '10.0.0.2';
    at = 999;
    assert.equal((await lookup('a.test'))[0]!.address, '10.0.0.1', 'within the span');
    assert.equal((await lookup('b.test'))[0]!.address, '10.0.0.2', 'another name is its own');
    at = 1000;
    assert.equal((await lookup('a.test'))[0]!.address, '10.0.0.2', 'after the span');
    assert.deepEqual(asked, ['a.test', 'b.test', 'a.test']);
    assert.equal(cachedLookup(lookup, 0), lookup, 'a span of 0 keeps nothing');
  });

  test("when a browser's allowed domains change, then its next requests follow the new list; another browser's proxy keeps its own", async () => {
    const lookup: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
    const [p, other] = [await egress(dev(), { lookup }), await egress(dev(), { lookup })];
    p.setAllowedDomains(['a.test']);
    other.setAllowedDomains(['b.test']);
    const status = async (proxy: EgressProxy, host: string) => (await viaProxy(proxy.port, `http://${host}:${site.port}/`)).status;
    assert.deepEqual([await status(p, 'a.test'), await status(p, 'b.test')], [200, 403]);
    p.setAllowedDomains(['*.b.test']);
    assert.deepEqual([await status(p, 'a.test'), await status(p, 'x.b.test'), await status(p, 'b.test')], [403, 200, 200]);
    assert.deepEqual([await status(other, 'a.test'), await status(other, 'b.test')], [403, 200], 'the other browser is untouched');
    p.setAllowedDomains(undefined);
    assert.equal(await status(p, 'a.test'), 200, 'no list: any');
  });

  test('when a denied endpoint is given by name, then the addresses it resolves to are refused on its port', async () => {
    const lookup: LookupAll = async (h) => (h === 'db.internal' || h === 'alias.test' ? [{ address: '127.0.0.1', family: 4 }] : []);
    const p = await egress({ allowPrivateNetworks: true, deniedLocalPorts: new Set(), deniedEndpoints: [{ host: 'db.internal', port: site.port }] }, { lookup });
    const r = await viaProxy(p.port, `http://alias.test:${site.port}/`);
    assert.equal(r.status, 403);
    assert.match(r.body, /denied endpoint/);
    assert.equal((await tunnel(p.port, `127.0.0.1:${site.port}`)).status, 403);
  });

  test('when a site cannot be reached, then the page names the host and why, in a header only the proxy can set', async () => {
    const lookup: LookupAll = async (h) => {
      if (h === 'forger.test') return [{ address: '127.0.0.1', family: 4 }];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    const p = await egress(dev(), { lookup });
    const nowhere = await viaProxy(p.port, 'http://nowhere.test/');
    assert.equal(nowhere.status, 502);
    assert.equal(nowhere.body, "The browser's egress proxy could not reach nowhere.test: cannot resolve nowhere.test.\n");
    assert.equal(nowhere.headers[EGRESS_FAILURE_HEADER], 'cannot resolve nowhere.test');
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const refused = await viaProxy(p.port, `http://127.0.0.1:${closed}/`);
    assert.equal(refused.status, 502);
    assert.match(String(refused.headers[EGRESS_FAILURE_HEADER]), /^cannot connect: .*ECONNREFUSED/);
    // A site that sends the header itself does not pass for the proxy.
    const forger = http.createServer((_req, res) => res.writeHead(200, { [EGRESS_FAILURE_HEADER]: 'forged', 'Content-Type': 'text/plain' }).end('hello'));
    await new Promise<void>((r) => forger.listen(0, '127.0.0.1', r));
    try {
      const page = await viaProxy(p.port, `http://forger.test:${(forger.address() as net.AddressInfo).port}/`);
      assert.equal(page.body, 'hello');
      assert.equal(page.headers[EGRESS_FAILURE_HEADER], undefined);
    } finally {
      forger.close();
    }
  });

  test('when the browser sends something that is not a proxy request, then it is refused without reaching anyone', async () => {
    const p = await egress(dev());
    const origin = await new Promise<Reply>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: p.port, path: '/' }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, headers: res.headers, body: '' });
      }).on('error', reject);
    });
    assert.equal(origin.status, 400);
    assert.equal((await viaProxy(p.port, `http://127.0.0.1:${site.port}/`, { method: 'TRACE' })).status, 405);
    assert.equal((await viaProxy(p.port, `ftp://127.0.0.1:${site.port}/`)).status, 400);
    assert.equal((await tunnel(p.port, 'no-port-here')).status, 400);
    // Headers beyond the bound are refused by the parser.
    const big = await viaProxy(p.port, `http://127.0.0.1:${site.port}/`, { headers: { 'X-Big': 'x'.repeat(32 * 1024) } }).catch((e: Error) => e);
    assert.ok(big instanceof Error || big.status === 400 || big.status === 431, 'oversized headers are not forwarded');
  });

  test('when the proxy stops, then open tunnels are cut and stop can be called again', async () => {
    const p = await EgressProxy.start({ policy: dev(), logger });
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      http
        .request({ host: '127.0.0.1', port: p.port, method: 'CONNECT', path: `127.0.0.1:${site.port}`, agent: false })
        .on('connect', (res: http.IncomingMessage, s: net.Socket) => (res.statusCode === 200 ? resolve(s) : reject(new Error(String(res.statusCode)))))
        .on('error', reject)
        .end();
    });
    const closed = once(socket, 'close');
    await p.stop();
    await within(closed, 'the connection closed');
    await p.stop();
    await assert.rejects(viaProxy(p.port, `http://127.0.0.1:${site.port}/`), /ECONNREFUSED/);
  });
});

// ---- chaining through an upstream proxy ----

describe('upstream proxy', () => {
  let site: Site;
  let upstream: { port: number; seen: { method: string; target: string; auth: string | undefined }[]; close(): Promise<void> };
  const creds = `Basic ${Buffer.from('user:p@ss').toString('base64')}`;

  before(async () => {
    site = await startSite('upstream-served');
    const seen: { method: string; target: string; auth: string | undefined }[] = [];
    // A forward proxy that wants Basic credentials and sends every host to the site.
    const server = http.createServer((req, res) => {
      seen.push({ method: req.method!, target: req.url!, auth: req.headers['proxy-authorization'] });
      if (req.headers['proxy-authorization'] !== creds) return void res.writeHead(407, { 'Proxy-Authenticate': 'Basic realm="t"' }).end();
      const u = new URL(req.url!);
      http.get({ host: '127.0.0.1', port: site.port, path: u.pathname, headers: { host: u.host } }, (r) => {
        res.writeHead(r.statusCode!, r.headers);
        r.pipe(res);
      });
    });
    server.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
      seen.push({ method: 'CONNECT', target: req.url!, auth: req.headers['proxy-authorization'] });
      if (req.headers['proxy-authorization'] !== creds) return void socket.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n');
      const to = net.connect(site.port, '127.0.0.1', () => {
        socket.write('HTTP/1.1 200 OK\r\n\r\n');
        to.pipe(socket).pipe(to);
      });
      to.on('error', () => socket.destroy());
      socket.on('error', () => to.destroy());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    upstream = {
      port: (server.address() as net.AddressInfo).port,
      seen,
      close: () => {
        server.closeAllConnections();
        return new Promise((r) => server.close(() => r()));
      },
    };
  });
  after(async () => {
    await site.close();
    await upstream.close();
  });

  const noLocalDns: LookupAll = async (h) => {
    throw new Error(`resolved locally: ${h}`);
  };

  test('when an upstream needs credentials, then plain http and tunnels go through it with them, and names are resolved by the upstream', async () => {
    const p = await egress(prod([]), { lookup: noLocalDns, upstream: new URL(`http://user:p%40ss@127.0.0.1:${upstream.port}`) });
    const r = await viaProxy(p.port, 'http://shop.example.de/cart?x=1', { headers: { 'Proxy-Authorization': 'Basic ZnJvbS1wYWdl' } });
    assert.equal(r.status, 200);
    assert.match(r.body, /<title>upstream-served<\/title>GET \/cart/);
    assert.deepEqual(upstream.seen.at(-1), { method: 'GET', target: 'http://shop.example.de/cart?x=1', auth: creds });
    const t = await tunnel(p.port, 'shop.example.de:443');
    assert.equal(t.status, 200);
    assert.match(t.page!, /upstream-served/);
    assert.deepEqual(upstream.seen.at(-1), { method: 'CONNECT', target: 'shop.example.de:443', auth: creds });
  });

  test('when an upstream is set, then refused literals are still refused here and never reach it', async () => {
    const p = await egress(prod([]), { lookup: noLocalDns, upstream: new URL(`http://user:p%40ss@127.0.0.1:${upstream.port}`) });
    const before = upstream.seen.length;
    assert.equal((await viaProxy(p.port, 'http://169.254.169.254/')).status, 403);
    assert.equal((await tunnel(p.port, '0x7f.1:443')).status, 403);
    assert.equal((await tunnel(p.port, 'localhost:443')).status, 403);
    assert.equal(upstream.seen.length, before);
  });

  test('when an upstream is set and a name resolves here to metadata or a private address, then it is refused before the upstream sees it', async () => {
    const rebinding = async (h: string) => [{ address: h === 'meta.attacker.test' ? '169.254.169.254' : '10.0.0.5', family: 4 }];
    const p = await egress(prod([]), { lookup: rebinding, upstream: new URL(`http://user:p%40ss@127.0.0.1:${upstream.port}`) });
    const before = upstream.seen.length;
    assert.equal((await viaProxy(p.port, 'http://meta.attacker.test/latest/meta-data/')).status, 403);
    assert.equal((await tunnel(p.port, 'postgres.internal.test:5432')).status, 403);
    assert.equal(upstream.seen.length, before, 'the upstream saw neither');
  });

  test('when the upstream refuses the credentials, then the browser gets 502, not a password prompt', async () => {
    const p = await egress(prod([]), { lookup: noLocalDns, upstream: new URL(`http://user:wrong@127.0.0.1:${upstream.port}`) });
    const r = await viaProxy(p.port, 'http://shop.example.de/');
    assert.equal(r.status, 502);
    assert.equal(r.headers['proxy-authenticate'], undefined);
    assert.equal((await tunnel(p.port, 'shop.example.de:443')).status, 502);
  });

  test('when the upstream is changed or removed, then the next requests take the new route', async () => {
    const p = await egress(dev([]), { lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    const before = upstream.seen.length;
    assert.equal((await viaProxy(p.port, `http://direct.test:${site.port}/`)).status, 200);
    assert.equal(upstream.seen.length, before, 'direct while no upstream is set');
    p.setUpstream(new URL(`http://user:p%40ss@127.0.0.1:${upstream.port}`));
    assert.equal((await viaProxy(p.port, 'http://shop.example.de/')).status, 200);
    assert.equal(upstream.seen.length, before + 1);
    p.setUpstream(undefined);
    assert.equal((await viaProxy(p.port, `http://direct.test:${site.port}/`)).status, 200);
    assert.equal(upstream.seen.length, before + 1);
  });

  test('when the upstream is a SOCKS5 proxy, then tunnels and plain http go through it by name', async () => {
    const asked: string[] = [];
    const socks = net.createServer((c) => {
      c.on('error', () => {});
      c.once('data', () => {
        c.write(Buffer.from([5, 0]));
        c.once('data', (req: Buffer) => {
          const len = req[4]!;
          asked.push(`${req.subarray(5, 5 + len).toString()}:${req.readUInt16BE(5 + len)}`);
          const to = net.connect(site.port, '127.0.0.1', () => {
            c.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]));
            to.pipe(c).pipe(to);
          });
          to.on('error', () => c.destroy());
        });
      });
    });
    socks.listen(0, '127.0.0.1');
    await once(socks, 'listening');
    const p = await egress(prod([]), { lookup: noLocalDns, upstream: new URL(`socks5://127.0.0.1:${(socks.address() as net.AddressInfo).port}`) });
    const t = await tunnel(p.port, 'shop.example.fr:443');
    assert.equal(t.status, 200);
    assert.match(t.page!, /upstream-served/);
    const r = await viaProxy(p.port, 'http://shop.example.fr/socks');
    assert.equal(r.status, 200);
    assert.match(r.body, /GET \/socks/);
    assert.deepEqual(asked, ['shop.example.fr:443', 'shop.example.fr:80']);
    await p.stop();
    await new Promise((r) => socks.close(r));
  });
});

// ---- ads and trackers ----

describe('ad and tracker blocking', () => {
  let site: Site;
  const toSite: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
  // A few rules of the lists' kinds: a host, a host for scripts from other sites only, a path on any host, an exception.
  const blocker = AdBlocker.fromText(['||ads.example.test^', '||tracker.example.test^$script,third-party', '/banner-ads/*', '@@||ads.example.test^*/allowed/'].join('\n'));
  before(async () => {
    site = await startSite('sites', '127.0.0.1');
  });
  after(async () => site.close());

  test('when blocking is on, then a tunnel to a listed host is refused before any connection, and other hosts tunnel as before', async () => {
    const names: string[] = [];
    const p = await egress(dev(), { lookup: async (h) => (names.push(h), toSite(h)) });
    p.setBlocker(blocker);
    assert.deepEqual(await tunnel(p.port, `ads.example.test:${site.port}`), { status: 403 });
    assert.deepEqual(await tunnel(p.port, `cdn.ads.example.test:${site.port}`), { status: 403 }, 'a subdomain of a listed host too');
    assert.deepEqual(names, [], 'a blocked host is not even resolved');
    assert.equal((await tunnel(p.port, `news.example.test:${site.port}`)).status, 200);
    assert.equal(p.blockedCount, 2);
    p.setBlocker(undefined);
    assert.equal((await tunnel(p.port, `ads.example.test:${site.port}`)).status, 200, 'off again: the host is reached');
  });

  test('when blocking is on, then plain http is matched on the whole URL, the page that asked and what is asked for; the refusal says which rule', async () => {
    const p = await egress(dev(), { lookup: toSite });
    p.setBlocker(blocker);
    const before = site.hits.length;
    const ad = await viaProxy(p.port, `http://ads.example.test:${site.port}/x.gif`, { headers: { Accept: 'image/avif,image/webp,*/*' } });
    assert.equal(ad.status, 403);
    assert.match(ad.body, /an ad or tracker \(filter list rule \|\|ads\.example\.test\^\)/);
    assert.equal((await viaProxy(p.port, `http://news.example.test:${site.port}/banner-ads/1.png`)).status, 403, 'a path rule applies on any host over http');
    const referer = `http://news.example.org:${site.port}/`;
    assert.equal((await viaProxy(p.port, `http://tracker.example.test:${site.port}/t.js`, { headers: { Referer: referer, 'Sec-Fetch-Dest': 'script' } })).status, 403, 'a third-party script');
    assert.equal(site.hits.length, before, 'nothing blocked reached the site');
    assert.equal((await viaProxy(p.port, `http://tracker.example.test:${site.port}/t.png`, { headers: { Referer: referer, Accept: 'image/png' } })).status, 200, 'an image is not a script');
    assert.equal((await viaProxy(p.port, `http://tracker.example.test:${site.port}/t.js`, { headers: { Referer: `http://tracker.example.test:${site.port}/`, 'Sec-Fetch-Dest': 'script' } })).status, 200, 'its own site loads it');
    assert.equal((await viaProxy(p.port, `http://ads.example.test:${site.port}/allowed/x.gif`)).status, 200, 'an exception rule wins');
    assert.equal((await viaProxy(p.port, `http://news.example.test:${site.port}/article`)).status, 200);
  });

  test('when a request has no Sec-Fetch-Dest, then its kind comes from the Accept Chromium sends for it', () => {
    assert.equal(requestType({ 'sec-fetch-dest': 'script' }), 'script');
    assert.equal(requestType({ 'sec-fetch-dest': 'iframe' }), 'sub_frame');
    assert.equal(requestType({ accept: 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8' }), 'image');
    assert.equal(requestType({ accept: 'text/css,*/*;q=0.1' }), 'stylesheet');
    assert.equal(requestType({ accept: 'text/html,application/xhtml+xml' }), 'main_frame');
    assert.equal(requestType({ accept: '*/*' }), 'other');
  });
});

// ---- real Chromium ----

describe('Chromium behind its egress proxy', () => {
  test('when a page navigates to an allowed loopback site, then it loads; to a denied port, then the navigation fails; and the browser keeps working', async () => {
    const site = await startSite('fixture', '127.0.0.1');
    const denied = await startSite('internal', '127.0.0.1');
    const p = await egress(dev([denied.port]));
    const browser = await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: [
        '--headless=new',
        ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
        `--proxy-server=http://127.0.0.1:${p.port}`,
        '--proxy-bypass-list=<-loopback>',
        '--disable-quic',
        '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
        ...TEST_CHROMIUM_ARGS.filter((a) => a !== '--no-sandbox'),
      ],
    });
    try {
      const page = await browser.newPage();
      const ok = await page.goto(`http://127.0.0.1:${site.port}/first`);
      assert.equal(ok?.status(), 200);
      assert.equal(await page.title(), 'fixture');

      const blocked = await page.goto(`http://127.0.0.1:${denied.port}/`);
      assert.equal(blocked?.status(), 403);
      assert.match(await page.evaluate(() => document.body.innerText), /Blocked by the browser network policy: internal service port/);
      await assert.rejects(page.goto(`https://localhost:${denied.port}/`), /ERR_TUNNEL_CONNECTION_FAILED/);
      assert.equal((await page.goto('http://169.254.169.254/latest/meta-data/'))?.status(), 403);
      // A page's own requests are held to the same policy.
      await page.evaluate((port) => fetch(`http://127.0.0.1:${port}/`, { mode: 'no-cors' }).catch(() => undefined), denied.port);
      assert.equal(denied.hits.length, 0, 'the internal service never saw a request');

      const again = await page.goto(`http://127.0.0.1:${site.port}/again`);
      assert.equal(again?.status(), 200);
      assert.equal(await page.title(), 'fixture');
      assert.deepEqual(site.hits.map((h) => h.url).filter((u) => u !== '/favicon.ico'), ['/first', '/again']);
    } finally {
      await browser.close();
      await site.close();
      await denied.close();
    }
  });
});
