import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { CdpConnection } from './cdp-connection.js';
import { applyProfileState, cookieDomains } from './profile-state.js';

test('when cookie domains are listed, then they are unique, without the leading dot, sorted', () => {
  const c = (domain: string) => ({ name: 'n', value: 'v', domain, path: '/', httpOnly: false, secure: false });
  assert.deepEqual(cookieDomains({ cookies: [c('.example.com'), c('b.test'), c('example.com'), c('A.test')], origins: [] }), ['a.test', 'b.test', 'example.com']);
  assert.deepEqual(cookieDomains({ cookies: [], origins: [] }), []);
});

test('when the browser dies while a saved state is loaded into it, then the load fails with "connection closed" and leaves no unhandled rejection (which would end the pool process)', async () => {
  // A stand-in Chromium on a pipe: it answers until the helper tab navigates, then goes away.
  const toPool = new PassThrough();
  const fromPool = new PassThrough();
  let buffered = '';
  fromPool.setEncoding('utf8');
  fromPool.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\0'); end !== -1; end = buffered.indexOf('\0')) {
      const msg = JSON.parse(buffered.slice(0, end)) as { id: number; method: string };
      buffered = buffered.slice(end + 1);
      if (msg.method === 'Page.navigate') toPool.destroy();
      else toPool.write(`${JSON.stringify({ id: msg.id, result: msg.method === 'Target.createTarget' ? { targetId: 'T' } : msg.method === 'Target.attachToTarget' ? { sessionId: 'S' } : {} })}\0`);
    }
  });
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const conn = new CdpConnection(toPool, fromPool, 5000);
    const state = { cookies: [], origins: [{ origin: 'http://a.test', localStorage: [['user', 'rae']] as [string, string][] }] };
    await assert.rejects(applyProfileState(conn, undefined, state, 5000), /connection closed/);
    // Unhandled rejections are reported once the microtasks run out: after the next turns of the event loop.
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled.map(String), []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
