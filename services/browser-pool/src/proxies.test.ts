/** Per-country proxies: the upstream handed to a browser's egress proxy, and the credential forwarder kept for the pool until then. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { createLogger } from '../../common/src/logger.js';
import { Proxies } from './proxies.js';

const logger = createLogger('test', 'silent');

test('when a country is configured, then upstreamFor gives its URL with credentials, and an unknown one is undefined and fails check', () => {
  const proxies = new Proxies(new Map([['de', new URL('http://user:p%40ss@proxy.example:3128')], ['fr', new URL('socks5://10.0.0.1:1080')]]), logger);
  const de = proxies.upstreamFor('de')!;
  assert.equal(de.href, 'http://user:p%40ss@proxy.example:3128/');
  de.password = 'changed';
  assert.equal(proxies.upstreamFor('de')!.password, 'p%40ss', 'callers get a copy');
  assert.equal(proxies.upstreamFor('fr')!.href, 'socks5://10.0.0.1:1080');
  assert.equal(proxies.upstreamFor('us'), undefined);
  assert.throws(() => proxies.check('us'), (e: unknown) => e instanceof InvalidArgumentError && /No proxy is configured for country "us"/.test(e.message));
});

test('when a proxy needs credentials, then serverFor gives a local proxy that sends them upstream, until stop', async () => {
  const seen: (string | undefined)[] = [];
  const upstream = http.createServer((req, res) => {
    seen.push(req.headers['proxy-authorization']);
    res.end(`upstream got ${req.url}`);
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const port = (upstream.address() as AddressInfo).port;
  const proxies = new Proxies(new Map([['de', new URL(`http://user:p%40ss@127.0.0.1:${port}`)], ['us', new URL('http://us.example:8080')]]), logger);
  assert.equal(await proxies.serverFor('us'), 'http://us.example:8080');
  const server = await proxies.serverFor('de');
  assert.match(server, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(await proxies.serverFor('de'), server, 'one forwarder per country');
  const local = new URL(server);
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ host: local.hostname, port: Number(local.port), path: 'http://shop.example.de/x', headers: { Host: 'shop.example.de' }, agent: false }, (res) => {
        let b = '';
        res.on('data', (c) => (b += c));
        res.on('end', () => resolve(b));
      })
      .on('error', reject);
  });
  assert.equal(body, 'upstream got http://shop.example.de/x');
  assert.deepEqual(seen, [`Basic ${Buffer.from('user:p@ss').toString('base64')}`]);
  await proxies.stop();
  await proxies.stop();
  await assert.rejects(proxies.serverFor('de'), /Shutting down/);
  await assert.rejects(
    new Promise((resolve, reject) => http.get({ host: local.hostname, port: Number(local.port), path: 'http://a.example/', agent: false }, resolve).on('error', reject)),
    /ECONNREFUSED/,
  );
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});
