import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Signer } from '../../common/src/signing.js';
import { cdpUrl, mintCdpToken, verifyCdpToken } from './cdp-token.js';

test('when a CDP token is checked, then it works only for its browser and until it expires', () => {
  let now = 1_800_000_000_000;
  const signer = new Signer('cdp-secret-0123456789-0123456789-abc', () => now);
  const exp = Math.floor(now / 1000) + 60;
  const token = mintCdpToken(signer, 'brw_a', exp);
  assert.equal(verifyCdpToken(signer, 'brw_a', token), 'ok');
  assert.equal(verifyCdpToken(signer, 'brw_b', token), 'invalid', 'scoped to one browser');
  assert.equal(verifyCdpToken(signer, 'brw_a', token.replace(/^\d+/, String(exp + 3600))), 'invalid', 'the expiry cannot be extended');
  assert.equal(verifyCdpToken(new Signer('another-secret-0123456789-0123456789', () => now), 'brw_a', token), 'invalid');
  for (const bad of [undefined, null, '', 'garbage', `${exp}.short`]) assert.equal(verifyCdpToken(signer, 'brw_a', bad), 'invalid');
  now += 60_000;
  assert.equal(verifyCdpToken(signer, 'brw_a', token), 'expired');
});

test('when a cdpUrl is built, then it is a WebSocket URL of the proxy path with the token', () => {
  const signer = new Signer('cdp-secret-0123456789-0123456789-abc');
  const u = new URL(cdpUrl('wss://cdp.example.com', signer, 'brw_a', 2_000_000_000));
  assert.equal(u.protocol, 'wss:');
  assert.equal(u.pathname, '/cdp/brw_a');
  assert.equal(verifyCdpToken(signer, 'brw_a', u.searchParams.get('token')), 'ok');
});
