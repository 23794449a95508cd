import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { backoffMs, post } from './dispatcher.js';

let server: http.Server;
let base = '';
const policy = { allowLoopback: true, deniedPorts: [] };

before(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    if (req.url === '/redirect') return void res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
    if (req.url === '/big') return void res.writeHead(500).end('e'.repeat(100_000));
    if (req.url === '/slow') return; // never answers
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

describe('one delivery attempt', () => {
  test('when the receiver answers 2xx, then the attempt succeeds with its latency', async () => {
    const o = await post(`${base}/ok`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 204);
    assert.equal(o.error, null);
  });

  test('when the receiver redirects, then the redirect is not followed', async () => {
    const o = await post(`${base}/redirect`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 302);
    assert.match(o.error!, /redirects are not followed/);
  });

  test('when the receiver answers a long error, then only an excerpt is kept', async () => {
    const o = await post(`${base}/big`, '{}', {}, policy, 2000);
    assert.equal(o.statusCode, 500);
    assert.ok(o.error!.length < 260, `${o.error!.length} characters`);
  });

  test('when the receiver does not answer, then the attempt ends at the timeout', async () => {
    const o = await post(`${base}/slow`, '{}', {}, policy, 300);
    assert.equal(o.statusCode, null);
    assert.match(o.error!, /no answer within 300 ms/);
    assert.ok(o.latencyMs < 2000);
  });

  test('when loopback is not allowed, then a loopback receiver is refused at delivery, by name or by address', async () => {
    const closed = { allowLoopback: false, deniedPorts: [] };
    assert.match((await post(`${base}/ok`, '{}', {}, closed, 2000)).error!, /loopback/);
    assert.match((await post(base.replace('127.0.0.1', 'localhost') + '/ok', '{}', {}, closed, 2000)).error!, /loopback/);
  });
});

test('when attempts keep failing, then the pause doubles from the base (±20 % jitter) up to the maximum', () => {
  assert.deepEqual([1, 2, 3, 4].map((n) => backoffMs(n, 1000, 5000, () => 0.5)), [1000, 2000, 4000, 5000]);
  assert.equal(backoffMs(1, 1000, 5000, () => 0), 800);
  assert.equal(backoffMs(1, 1000, 5000, () => 1), 1200);
});
