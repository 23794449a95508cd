/** The dashboard's serving over real HTTP: the page's headers and nonce, cached assets, compression, refusals. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import express from 'express';
import { tempDir } from '../../test/support/infra.js';
import { loadGatewayConfig } from './config.js';
import { contentSecurityPolicy, dashboardRouter, NONCE_PLACEHOLDER } from './dashboard.js';

let dir: string;
let server: http.Server;
let base: string;
const JS = 'export const hello = "dashboard";\n'.repeat(100);

before(async () => {
  dir = tempDir('dashboard');
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(
    path.join(dir, 'index.html'),
    `<!doctype html><meta property="csp-nonce" nonce="${NONCE_PLACEHOLDER}"><script type="module" src="/assets/index-abc123.js" nonce="${NONCE_PLACEHOLDER}"></script>`,
  );
  fs.writeFileSync(path.join(dir, 'assets', 'index-abc123.js'), JS);
  fs.writeFileSync(path.join(dir, 'assets', 'index-abc123.js.gz'), gzipSync(JS));
  fs.writeFileSync(path.join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  fs.writeFileSync(path.join(dir, 'secret.env'), 'NOT=SERVED');
  const app = express();
  app.use(dashboardRouter({ dir, liveViewUrl: 'https://live.example.com/base', filesUrl: 'https://files.example.com' }));
  app.use((_req, res) => void res.status(404).json({ detail: 'Not Found' }));
  server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  fs.rmSync(dir, { recursive: true, force: true });
});

test('when the page is asked for, then it comes with a strict policy whose style nonce is fresh each time and is the one in the page', async () => {
  const a = await fetch(`${base}/`);
  const b = await fetch(`${base}/`);
  assert.equal(a.status, 200);
  assert.match(a.headers.get('content-type')!, /^text\/html/);
  assert.equal(a.headers.get('cache-control'), 'no-cache');
  assert.equal(a.headers.get('x-frame-options'), 'DENY');
  assert.equal(a.headers.get('referrer-policy'), 'no-referrer');
  const csp = a.headers.get('content-security-policy')!;
  const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
  assert.ok(nonce && nonce.length >= 16);
  const html = await a.text();
  assert.ok(html.includes(`nonce="${nonce}"`) && !html.includes(NONCE_PLACEHOLDER));
  assert.notEqual(/'nonce-([^']+)'/.exec(b.headers.get('content-security-policy')!)?.[1], nonce);

  const directives = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));
  assert.equal(directives['default-src'], "'none'");
  assert.equal(directives['script-src'], "'self'");
  assert.equal(directives['frame-src'], 'https://live.example.com');
  assert.equal(directives['frame-ancestors'], "'none'");
  assert.equal(directives['connect-src'], "'self' https://files.example.com");
  assert.equal(directives['media-src'], 'https://files.example.com');
  assert.ok(!csp.includes('unsafe-inline') && !csp.includes('unsafe-eval'));
});

test('when a hashed asset is asked for, then it is cached for a year and sent compressed to a client that accepts it', async () => {
  const plain = await fetch(`${base}/assets/index-abc123.js`, { headers: { 'accept-encoding': 'identity' } });
  assert.equal(plain.status, 200);
  assert.equal(plain.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.match(plain.headers.get('content-type')!, /^text\/javascript/);
  assert.equal(plain.headers.get('content-encoding'), null);
  assert.equal(await plain.text(), JS);

  const raw = await new Promise<{ encoding: string | undefined; length: number }>((resolve, reject) => {
    http.get(`${base}/assets/index-abc123.js`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
      let length = 0;
      res.on('data', (c: Buffer) => (length += c.length));
      res.on('end', () => resolve({ encoding: res.headers['content-encoding'], length }));
    }).on('error', reject);
  });
  assert.equal(raw.encoding, 'gzip');
  assert.ok(raw.length < JS.length / 5, `${raw.length} bytes on the wire for ${JS.length}`);
});

test("when something else is asked for, then only the build's public files are served; the rest is the API's 404", async () => {
  assert.equal((await fetch(`${base}/favicon.svg`)).status, 200);
  for (const p of ['/assets/missing-1.js', '/assets/index-abc123.js.gz', '/secret.env', '/assets/..%2Findex.html', '/assets/%2e%2e%2fsecret.env', '/.vite/manifest.json']) {
    const res = await fetch(`${base}${p}`);
    assert.equal(res.status, 404, p);
    assert.deepEqual(await res.json(), { detail: 'Not Found' }, p);
  }
});

test('when the dashboard is not built, then / says how to build it', async () => {
  const app = express().use(dashboardRouter({ dir: path.join(dir, 'nothing-here'), liveViewUrl: 'http://localhost:8082', filesUrl: 'http://localhost:8081' }));
  const s = http.createServer(app);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  try {
    const res = await fetch(`http://127.0.0.1:${(s.address() as AddressInfo).port}/`);
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { detail: 'The dashboard is not built; run make build' });
  } finally {
    await new Promise<void>((r) => s.close(() => r()));
  }
});

test('when the gateway is configured, then the policy names the live view and file hosts it is given, else the local defaults', () => {
  const local = loadGatewayConfig({});
  assert.equal(local.dashboardDir, 'dashboard/dist');
  const csp = contentSecurityPolicy({ liveViewUrl: local.liveViewBaseUrl, filesUrl: local.filesPublicUrl }, 'n');
  assert.match(csp, /frame-src http:\/\/localhost:8082;/);
  assert.match(csp, /connect-src 'self' http:\/\/localhost:8081;/);
  const deployed = loadGatewayConfig({ LIVE_VIEW_BASE_URL: 'https://live.agent-task.example.com', FILES_PUBLIC_URL: 'https://files.agent-task.example.com' });
  assert.match(contentSecurityPolicy({ liveViewUrl: deployed.liveViewBaseUrl, filesUrl: deployed.filesPublicUrl }, 'n'), /frame-src https:\/\/live\.agent-task\.example\.com;/);
});
