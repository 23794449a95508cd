import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Signer } from '../../common/src/signing.js';
import { mintLiveViewToken, verifyLiveViewToken } from './live-view-token.js';

test('when a live view token is checked, then it works only for its browser, its mode and before expiry', () => {
  let now = 1_800_000_000_000;
  const signer = new Signer('live-view-secret-0123456789-abcdefgh', () => now);
  const { token, expiresAtSec } = mintLiveViewToken(signer, 'prj_a', 'brw_a', 'view', 60);
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token), { ok: true, mode: 'view', projectId: 'prj_a', expiresAtSec });
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_b', token), { ok: false, reason: 'invalid' });
  // Any change to any character (a view link cannot be upgraded nor moved) is refused.
  for (let i = 0; i < token.length; i++) {
    const changed = token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
    assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', changed), { ok: false, reason: 'invalid' }, `changed at ${i}`);
  }
  assert.deepEqual(verifyLiveViewToken(new Signer('another-secret-0123456789-abcdefghij', () => now), 'brw_a', token), { ok: false, reason: 'invalid' });
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', 'garbage'), { ok: false, reason: 'invalid' });
  now += 60_000;
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token), { ok: false, reason: 'expired' });
});

test('when a token is minted, then it shows neither the project id nor its mode, and two tokens differ', () => {
  const signer = new Signer('live-view-secret-0123456789-abcdefgh');
  const a = mintLiveViewToken(signer, 'prj_visible', 'brw_a', 'interactive', 60).token;
  const b = mintLiveViewToken(signer, 'prj_visible', 'brw_a', 'interactive', 60).token;
  assert.notEqual(a, b);
  for (const t of [a, b]) {
    for (const hidden of ['prj_visible', 'interactive', 'brw_a']) {
      assert.ok(!t.includes(hidden) && !Buffer.from(t, 'base64url').toString('latin1').includes(hidden), `${hidden} not in the token`);
    }
  }
});
