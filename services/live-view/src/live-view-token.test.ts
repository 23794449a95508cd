import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Signer } from '../../common/src/signing.js';
import { mintLiveViewToken, verifyLiveViewToken } from './live-view-token.js';

test('when a live view token is checked, then it works only for its browser, its project, its mode and before expiry', () => {
  let now = 1_800_000_000_000;
  const signer = new Signer('live-view-secret-0123456789-abcdefgh', () => now);
  const { token, expiresAtSec } = mintLiveViewToken(signer, 'prj_a', 'brw_a', 'view', 60);
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token), { ok: true, mode: 'view', projectId: 'prj_a', expiresAtSec });
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_b', token), { ok: false, reason: 'invalid' });
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token.replace(/^view/, 'interactive')), { ok: false, reason: 'invalid' }, 'a view link cannot be upgraded');
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token.replace('prj_a', 'prj_b')), { ok: false, reason: 'invalid' }, 'a link cannot be moved to another project');
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', 'garbage'), { ok: false, reason: 'invalid' });
  now += 60_000;
  assert.deepEqual(verifyLiveViewToken(signer, 'brw_a', token), { ok: false, reason: 'expired' });
});
