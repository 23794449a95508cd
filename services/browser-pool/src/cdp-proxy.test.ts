import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { guardCommand, urlRefusal } from './cdp-proxy.js';

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
