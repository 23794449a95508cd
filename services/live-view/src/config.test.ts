import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../common/src/config.js';
import { loadLiveViewConfig } from './config.js';

test('when nothing is set, then a recording lease lasts 20 s, renewed every 5 s, and parts last 10 s', () => {
  const c = loadLiveViewConfig({ DATA_DIR: '/data' });
  assert.deepEqual([c.recordingLeaseMs, c.recordingRenewMs, c.recordingPartMs], [20000, 5000, 10000]);
});

test('when the renewal is longer than half the lease or the instance id cannot name a folder, then the configuration is refused, naming the variable', () => {
  assert.throws(() => loadLiveViewConfig({ DATA_DIR: '/data', RECORDING_LEASE_MS: '8000', RECORDING_RENEW_MS: '5000' }), (e: Error) => e instanceof ConfigError && /RECORDING_RENEW_MS \(5000\) must be at most half of RECORDING_LEASE_MS \(8000\)/.test(e.message));
  assert.throws(() => loadLiveViewConfig({ DATA_DIR: '/data', LIVE_VIEW_INSTANCE_ID: '../other' }), (e: Error) => e instanceof ConfigError && /LIVE_VIEW_INSTANCE_ID must be/.test(e.message));
  assert.equal(loadLiveViewConfig({ DATA_DIR: '/data', LIVE_VIEW_INSTANCE_ID: 'live-view-7d9f8-abcde' }).instanceId, 'live-view-7d9f8-abcde', 'a pod name will do');
});
