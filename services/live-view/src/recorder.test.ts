import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, type BrowserLifecycleEvent } from '../../../gen/ats/common/v1/common.js';
import { browserEventOf } from './recorder.js';

const payload = (p: Partial<BrowserLifecycleEvent>): BrowserLifecycleEvent => ({
  browserId: 'brw_1',
  projectId: 'prj_1',
  sessionId: undefined,
  runId: undefined,
  agent: Agent.AGENT_UNSPECIFIED,
  profileId: undefined,
  reason: undefined,
  ts: '2026-01-01T00:00:01.000Z',
  ...p,
});
const delivery = (p: Partial<BrowserLifecycleEvent>, browserId = 'brw_1') => ({ key: { browserId }, payload: payload(p), requestId: undefined });

test('when a lifecycle message names its project, then the recorder takes its browser and time from it', () => {
  assert.deepEqual(browserEventOf(delivery({}), 5), { browserId: 'brw_1', projectId: 'prj_1', tsMs: Date.parse('2026-01-01T00:00:01.000Z') });
  assert.equal(browserEventOf(delivery({ ts: 'not a time' }), 5)?.tsMs, 5, 'an unreadable time is now');
});

test('when a lifecycle message names no project or another browser than its subject, then it is ignored', () => {
  assert.equal(browserEventOf(delivery({ projectId: '' }), 5), undefined);
  assert.equal(browserEventOf(delivery({ browserId: 'brw_2' }), 5), undefined);
});
