import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../common/src/logger.js';
import { Signer } from '../../common/src/signing.js';
import { CdpProxy, guardCommand, urlRefusal } from './cdp-proxy.js';
import { mintCdpToken } from './cdp-token.js';

test("when a client sets where downloads go, then the browser's own folder is kept and the rest of the message is untouched", () => {
  const out = guardCommand({ id: 7, method: 'Browser.setDownloadBehavior', params: { behavior: 'allowAndName', downloadPath: '/home/me/tmp', eventsEnabled: true }, sessionId: 'S' }, '/pool/b/downloads');
  assert.deepEqual(out, { send: { id: 7, method: 'Browser.setDownloadBehavior', params: { behavior: 'allowAndName', downloadPath: '/pool/b/downloads', eventsEnabled: true }, sessionId: 'S' } });
  const page = guardCommand({ id: 8, method: 'Page.setDownloadBehavior', params: { behavior: 'allow', downloadPath: '/etc' } }, '/d');
  assert.deepEqual('send' in page && page.send.params, { behavior: 'allow', downloadPath: '/d' });
  const deny = { id: 9, method: 'Browser.setDownloadBehavior', params: { behavior: 'deny' } };
  assert.deepEqual(guardCommand(deny, '/d'), { send: deny }, 'a client may refuse downloads');
  const nav = { id: 10, method: 'Page.navigate', params: { url: 'https://x.test/setDownloadBehavior' } };
  assert.deepEqual(guardCommand(nav, '/d'), { send: nav });
});

test('when a client opens an internal or host URL, then it is refused with the reason; web URLs pass', () => {
  for (const url of ['file:///etc/passwd', 'FILE:///data/secret', 'chrome://version', 'chrome-untrusted://x', 'devtools://devtools/x', 'view-source:http://a', 'chrome-extension://abc/x', 'filesystem:http://a/x', 'about:config']) {
    for (const method of ['Page.navigate', 'Target.createTarget']) {
      const v = guardCommand({ id: 1, method, params: { url } }, '/d');
      assert.ok('refuse' in v && /URLs are blocked in this browser/.test(v.refuse), `${method} ${url}: ${JSON.stringify(v)}`);
    }
  }
  for (const url of ['https://example.com/', 'http://127.0.0.1:8000/a', 'data:text/html,hi', 'about:blank', '']) assert.equal(urlRefusal(url), undefined, url);
  assert.equal(urlRefusal('not a url'), 'the URL does not parse');
  assert.ok('refuse' in guardCommand({ id: 2, method: 'Network.loadNetworkResource', params: { url: 'file:///etc/hostname', frameId: 'F', options: {} } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 3, method: 'Fetch.continueRequest', params: { requestId: 'r', url: 'file:///etc/hostname' } }, '/d'));
});

test("when a client sets files on an input, then only files in the browser's downloads folder are accepted", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'guard-'));
  try {
    const downloads = path.join(dir, 'downloads');
    fs.mkdirSync(downloads);
    fs.writeFileSync(path.join(downloads, 'report.pdf'), 'x');
    fs.symlinkSync('/etc/hostname', path.join(downloads, 'escape'));
    const set = (files: unknown) => guardCommand({ id: 1, method: 'DOM.setFileInputFiles', params: { files, backendNodeId: 3 } }, downloads);
    assert.ok('send' in set([path.join(downloads, 'report.pdf')]));
    for (const bad of [['/etc/passwd'], [path.join(downloads, '..', 'secret')], [path.join(downloads, 'escape')], ['report.pdf'], [42]]) {
      const v = set(bad);
      assert.ok('refuse' in v && /only files in the browser's downloads folder/.test(v.refuse), JSON.stringify(bad));
      // The refusal names no host path (neither the browser's folder nor any part of it).
      assert.ok(!v.refuse.includes(dir) && !/\/(tmp|home|var|data|work|run)\b/.test(v.refuse), v.refuse);
    }
    const drag = guardCommand({ id: 2, method: 'Input.dispatchDragEvent', params: { type: 'drop', x: 1, y: 1, data: { items: [], files: ['/etc/shadow'], dragOperationsMask: 1 } } }, downloads);
    assert.ok('refuse' in drag);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('when a client asks for its own proxy, a page-side CDP binding or an extension, then it is refused', () => {
  assert.ok('refuse' in guardCommand({ id: 1, method: 'Target.createBrowserContext', params: { proxyServer: 'direct://' } }, '/d'));
  // An empty proxyServer gives the context a direct connection, past the egress proxy.
  assert.ok('refuse' in guardCommand({ id: 11, method: 'Target.createBrowserContext', params: { proxyServer: '' } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 12, method: 'Target.createBrowserContext', params: { proxyBypassList: '' } }, '/d'));
  assert.ok('send' in guardCommand({ id: 2, method: 'Target.createBrowserContext', params: { disposeOnDetach: true } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 3, method: 'Target.exposeDevToolsProtocol', params: { targetId: 'T' } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 4, method: 'Extensions.loadUnpacked', params: { path: '/tmp/x' } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 5, method: 'PWA.install', params: { manifestId: 'm', installUrlOrBundleUrl: 'file:///x.swbn' } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 6, method: 'Page.handleFileChooser', params: { action: 'accept', files: ['/etc/passwd'] } }, '/d'));
});

test('when a client wraps commands for a non-flat session, then it is refused: every command must pass the guard', () => {
  const wrapped = JSON.stringify({ id: 1, method: 'Page.navigate', params: { url: 'file:///etc/passwd' } });
  assert.ok('refuse' in guardCommand({ id: 1, method: 'Target.sendMessageToTarget', params: { sessionId: 'S', message: wrapped } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 2, method: 'Target.attachToTarget', params: { targetId: 'T' } }, '/d'));
  assert.ok('refuse' in guardCommand({ id: 3, method: 'Target.setAutoAttach', params: { autoAttach: true, waitForDebuggerOnStart: false } }, '/d'));
  assert.ok('send' in guardCommand({ id: 4, method: 'Target.attachToTarget', params: { targetId: 'T', flatten: true } }, '/d'));
  assert.ok('send' in guardCommand({ id: 5, method: 'Target.setAutoAttach', params: { autoAttach: true, waitForDebuggerOnStart: true, flatten: true } }, '/d'));
  assert.ok('send' in guardCommand({ id: 6, method: 'Target.setAutoAttach', params: { autoAttach: false, waitForDebuggerOnStart: false } }, '/d'));
});

describe('the relay to the replica that runs a browser', () => {
  const signer = new Signer('relay-test-secret-0123456789-0123456789');
  const token = mintCdpToken(signer, 'brw_relayed', Math.floor(Date.now() / 1000) + 600);
  const listeners: net.Server[] = [];
  let proxy: CdpProxy;
  let proxyPort: number;
  /** A TCP server standing for a peer: counts connections, does what `onSocket` does with each. */
  async function peer(onSocket: (s: net.Socket) => void = () => {}): Promise<{ port: number; connections: number }> {
    const p = { port: 0, connections: 0 };
    const srv = net.createServer((s) => {
      p.connections++;
      s.on('error', () => {});
      onSocket(s);
    });
    listeners.push(srv);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    p.port = (srv.address() as net.AddressInfo).port;
    return p;
  }
  let owner: { port: number; connections: number };
  /** Sends one raw request head to the proxy and returns its whole answer (or what came before the connection ended). */
  const rawAnswer = (head: string, port = proxyPort) =>
    new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.write(head));
      let got = '';
      s.on('data', (c) => (got += c));
      s.on('error', () => resolve(got));
      s.on('close', () => resolve(got));
    });
  /** Its status line only. */
  const raw = async (head: string) => (await rawAnswer(head)).split('\r\n')[0]!;

  before(async () => {
    // The owner sends the head of an answer, then breaks the connection.
    owner = await peer((s) => s.once('data', () => s.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"Brow', () => s.destroy())));
    proxy = new CdpProxy({
      signer,
      logger: createLogger('test', 'silent'),
      backend: { live: () => undefined, publicUrl: () => '', owner: async () => ({ id: 'pool-x', cdpUrl: `ws://127.0.0.1:${owner.port}` }) },
    });
    proxyPort = await proxy.listen('127.0.0.1', 0);
  });
  after(async () => {
    await proxy.stop();
    for (const l of listeners) l.close();
  });

  test('when a request names another host in its path (//host/…, /\\host/…), then it is refused and nothing connects to that host', async () => {
    const evil = await peer((s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi'));
    for (const path of [`//127.0.0.1:${evil.port}/cdp/brw_relayed?token=${token}`, `/\\127.0.0.1:${evil.port}/cdp/brw_relayed?token=${token}`, `//127.0.0.1:${evil.port}/cdp/brw_relayed/json/version?token=${token}`]) {
      const upgrade = `GET ${path} HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
      assert.match(await raw(upgrade), /^HTTP\/1\.1 404/, path);
      assert.match(await raw(`GET ${path} HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 404/, path);
    }
    assert.equal(evil.connections, 0, 'the relay never connected to the named host');
  });

  test("when the owner's answer to a /json request breaks off midway, then the client's connection ends and the proxy goes on serving", async () => {
    const before = owner.connections;
    const broken = await raw(`GET /cdp/brw_relayed/json/version?token=${token} HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n`);
    assert.match(broken, /^HTTP\/1\.1 200/, 'the owner’s head was relayed');
    assert.equal(owner.connections, before + 1);
    assert.match(await raw(`GET /cdp/brw_relayed/json/version?token=forged HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 401/, 'still serving');
  });

  test("when the owner's address refuses connections (it may be restarting), then the client is told 503 with a Retry-After, on the WebSocket and on /json", async () => {
    const gone = await peer();
    const port = gone.port;
    await new Promise<void>((r) => listeners.pop()!.close(() => r()));
    const unreachable: string[] = [];
    const silent = new CdpProxy({
      signer,
      logger: createLogger('test', 'silent'),
      backend: { live: () => undefined, publicUrl: () => '', owner: async () => ({ id: 'pool-gone', cdpUrl: `ws://127.0.0.1:${port}` }), ownerUnreachable: (id) => void unreachable.push(id) },
    });
    const silentPort = await silent.listen('127.0.0.1', 0);
    try {
      const upgrade = `GET /cdp/brw_relayed?token=${token} HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
      for (const head of [upgrade, `GET /cdp/brw_relayed/json/version?token=${token} HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n`]) {
        const answer = await rawAnswer(head, silentPort);
        assert.match(answer, /^HTTP\/1\.1 503 /, answer);
        assert.match(answer, /\r\nRetry-After: 1\r\n/i, answer);
        assert.match(answer, /"detail":"The browser's pool replica is not answering \(it may be restarting\); try again shortly"/, answer);
      }
      assert.deepEqual(unreachable, ['pool-gone', 'pool-gone'], 'each refusal is reported, so a dead owner is reaped');
    } finally {
      await silent.stop();
    }
  });
});
