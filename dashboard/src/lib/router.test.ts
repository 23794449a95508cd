import assert from 'node:assert/strict';
import { test } from 'node:test';
import { href, parseHash, type Route } from './router.ts';

test('when a hash is parsed, then each page and its filters are recognised, and an empty hash is the runs list', () => {
  assert.deepEqual(parseHash(''), { page: 'runs' });
  assert.deepEqual(parseHash('#/runs?status=running&agent=browsercode'), { page: 'runs', status: 'running', agent: 'browsercode' });
  assert.deepEqual(parseHash('#/runs/browser-agent/run_abc'), { page: 'run', agent: 'browser-agent', id: 'run_abc' });
  assert.deepEqual(parseHash('#/runs/new?session=ses_1&agent=browsercode'), { page: 'new-run', session: 'ses_1', agent: 'browsercode' });
  assert.deepEqual(parseHash('#/browsers/brw_1'), { page: 'browser', id: 'brw_1' });
  assert.deepEqual(parseHash('#/nowhere/at/all/x'), { page: 'not-found', path: '/nowhere/at/all/x' });
});

test('when a route is turned into a hash and back, then it is the same route', () => {
  const routes: Route[] = [
    { page: 'overview' },
    { page: 'runs', agent: 'browsercode', status: 'failed', session: 'ses_x' },
    { page: 'new-run', agent: 'browser-agent', session: 'ses_y' },
    { page: 'run', agent: 'browsercode', id: 'run_1/../x' },
    { page: 'browser', id: 'brw_2' },
    { page: 'workspace', id: 'wsp_3' },
    { page: 'profiles' },
  ];
  for (const r of routes) assert.deepEqual(parseHash(href(r)), r);
});
