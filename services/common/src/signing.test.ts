import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Signer } from './signing.js';

test('when a signature is checked, then only the exact parts before expiry pass', () => {
  let now = 1_800_000_000_000;
  const s = new Signer('a-secret-of-some-length-0123456789', () => now);
  const exp = s.expiry(3600);
  const sig = s.sign(['GET', '/d/blb_1', 'a.txt'], exp);
  assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp, sig), 'ok');
  assert.equal(s.verify(['PUT', '/d/blb_1', 'a.txt'], exp, sig), 'invalid', 'another method');
  assert.equal(s.verify(['GET', '/d/blb_2', 'a.txt'], exp, sig), 'invalid', 'another resource');
  assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp + 1, sig), 'invalid', 'a stretched expiry');
  const flipped = (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);
  assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp, flipped), 'invalid', 'one character changed');
  for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') {
    if (c !== sig[42]) assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp, sig.slice(0, 42) + c), 'invalid', `last character ${c}`);
  }
  assert.equal(new Signer('another-secret-0123456789abcdefgh', () => now).verify(['GET', '/d/blb_1', 'a.txt'], exp, sig), 'invalid');
  now += 3599_000;
  assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp, sig), 'ok', 'just before the hour');
  now += 1000;
  assert.equal(s.verify(['GET', '/d/blb_1', 'a.txt'], exp, sig), 'expired', 'at the hour');
});

test('when parts are joined differently, then signatures differ', () => {
  const s = new Signer('a-secret-of-some-length-0123456789');
  assert.notEqual(s.sign(['ab', 'c'], 1), s.sign(['a', 'bc'], 1));
});
