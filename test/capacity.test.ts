/**
 * Capacity and stops through the public API, every service its own process, real Chromium: runs
 * never fail for the project's browser limit (idle session browsers are reclaimed, runs wait
 * queued), and a stop at any moment of a run's start-up is final (no browser left, nothing after
 * the terminal event). The browser limit is lowered to 3 so the limit is reached quickly.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { serveSite, type TestSite } from './support/site.js';
import { readSse, type SseEvent } from './support/sse.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const LIMIT = 3;
/** Runs one after another on new sessions: well past the limit, so earlier sessions' browsers must give way. */
const SERIAL = 3 * LIMIT;
/** Runs created at once: five times the limit. */
const BURST = 5 * LIMIT;
let f: StackFixture;
let site: TestSite;

before(async () => {
  site = await serveSite();
  f = await startStackFixture({
    projects: ['serial', 'burst', 'cdp', 'stops'],
    env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: String(LIMIT), MAX_RUNNING_RUNS_PER_PROJECT: '5', DEFAULT_MODEL: 'builtin', POOL_WARM_SIZE: '2' },
  });
});
after(async () => {
  await f?.stop();
  await site?.close();
});

type Project = 'serial' | 'burst' | 'cdp' | 'stops';
const BASE = '/api/v1/agents/browser-agent';
const call = (p: Project, method: string, url: string, body?: unknown) =>
  f.api(url, { method, key: f.projects[p]!.key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
const getJson = async <T = Record<string, any>>(p: Project, url: string): Promise<T> => (await (await call(p, 'GET', url)).json()) as T;

async function start(p: Project, body: Record<string, unknown>): Promise<{ id: string; sessionId: string }> {
  const res = await call(p, 'POST', `${BASE}/runs`, body);
  assert.equal(res.status, 202, await res.clone().text());
  return (await res.json()) as { id: string; sessionId: string };
}

const stream = (p: Project, runId: string) => f.api(`${BASE}/runs/${runId}/events/stream`, { key: f.projects[p]!.key });

/** Follows the run to its terminal event, then reads it. */
async function finished(p: Project, runId: string): Promise<{ run: Record<string, any>; events: SseEvent[] }> {
  const events = await readSse(await stream(p, runId));
  return { run: await getJson(p, `${BASE}/runs/${runId}`), events };
}

const activeBrowsers = async (p: Project) => (await getJson<{ items: { id: string; sessionId: string | null }[] }>(p, '/api/v1/browsers?status=active&limit=200')).items;
/** A one-step run: cheap, so the limit, not the work, sets the pace. */
const quick = () => ({ task: 'Extract the title' });
const forever = () => ({ task: `Open ${site.url('run-table.html')}. Wait for 'a text that never appears'.` });

describe('the browser limit', () => {
  test(`when ${SERIAL} runs on new sessions follow one another, then all complete: the idle browsers of earlier sessions give up their slots, and those sessions say why they closed`, async () => {
    const sessions: string[] = [];
    for (let i = 0; i < SERIAL; i++) {
      const { id, sessionId } = await start('serial', quick());
      const { run } = await finished('serial', id);
      assert.equal(run.status, 'completed', `run ${i + 1}: ${run.error}`);
      sessions.push(sessionId);
    }
    const active = await activeBrowsers('serial');
    assert.ok(active.length <= LIMIT, `at most ${LIMIT} browsers active (saw ${active.length})`);
    const first = await getJson('serial', `${BASE}/sessions/${sessions[0]}`);
    assert.deepEqual([first.status, first.closedReason], ['closed', 'browser reclaimed for a newer run']);
    const last = await getJson('serial', `${BASE}/sessions/${sessions.at(-1)}`);
    assert.deepEqual([last.status, last.closedReason], ['open', null]);
    const followUp = await call('serial', 'POST', `${BASE}/runs`, { task: 'Extract the title', session_id: sessions[0] });
    assert.equal(followUp.status, 409);
    assert.deepEqual(await followUp.json(), { detail: 'Session is closed' });
  });

  test(`when ${BURST} runs are created at once, then all complete; those beyond the browser limit waited queued and said so`, async () => {
    const created = await Promise.all(Array.from({ length: BURST }, () => start('burst', quick())));
    const results = await Promise.all(created.map((c) => finished('burst', c.id)));
    const failed = results.filter((r) => r.run.status !== 'completed').map((r) => `${r.run.id} ${r.run.status}: ${r.run.error}`);
    assert.deepEqual(failed, []);
    const waited = results.filter((r) => r.events.some((e) => e.event === 'run.waiting'));
    assert.ok(waited.length > 0, 'some runs waited for a browser slot');
    const wait = waited[0]!.events.find((e) => e.event === 'run.waiting')!.data.data;
    assert.match(String(wait.message), /Waiting for a browser slot: .*3 active browsers/);
    for (const r of waited) {
      const types = r.events.map((e) => e.event);
      assert.equal(types.filter((t) => t === 'run.waiting').length, 1, 'the wait is told once');
      assert.ok(types.indexOf('run.waiting') < types.indexOf('run.started'), 'it waited before it started');
    }
    assert.ok((await activeBrowsers('burst')).length <= LIMIT);
  });

  test('when POST /browsers finds only idle session browsers, then it reclaims one (201); when every browser is in real use, then 429 with Retry-After and a new run waits queued until one stops', async () => {
    const runs = [];
    for (let i = 0; i < LIMIT; i++) runs.push(await start('cdp', quick()));
    for (const r of runs) assert.equal((await finished('cdp', r.id)).run.status, 'completed');

    const standalone: string[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await call('cdp', 'POST', '/api/v1/browsers', {});
      assert.equal(res.status, 201, await res.clone().text());
      standalone.push(((await res.json()) as { id: string }).id);
    }
    // The session closes when the run service hears of the reclaim (the pool's browser event): soon, not at once.
    for (const r of runs) {
      const s = await until(
        async () => {
          const s = await getJson('cdp', `${BASE}/sessions/${r.sessionId}`);
          return s.status !== 'open' && s;
        },
        { intervalMs: 100, what: `session ${r.sessionId} closing` },
      );
      assert.deepEqual([s.status, s.closedReason], ['closed', 'browser reclaimed for a newer run']);
    }
    assert.deepEqual((await activeBrowsers('cdp')).map((b) => b.id).sort(), [...standalone].sort());

    const over = await call('cdp', 'POST', '/api/v1/browsers', {});
    assert.equal(over.status, 429);
    assert.ok(Number(over.headers.get('retry-after')) >= 1, 'Retry-After is given');

    const waiting = await start('cdp', quick());
    const told = await readSse(await stream('cdp', waiting.id), (e) => e.event === 'run.waiting');
    assert.equal(told.at(-1)!.event, 'run.waiting');
    assert.equal((await getJson('cdp', `${BASE}/runs/${waiting.id}`)).status, 'queued');
    assert.equal((await call('cdp', 'POST', `/api/v1/browsers/${standalone[0]}/stop`)).status, 200);
    const { run } = await finished('cdp', waiting.id);
    assert.equal(run.status, 'completed', run.error);
    for (const id of standalone.slice(1)) await call('cdp', 'POST', `/api/v1/browsers/${id}/stop`);
  });
});

describe('stopping a run while it starts', () => {
  /** Polls until the project has no active browser (a leaked one stays active for its 60-minute timeout). */
  async function noActiveBrowser(p: Project): Promise<{ id: string }[]> {
    let active: { id: string }[] = [];
    await until(async () => (active = await activeBrowsers(p)).length === 0, { intervalMs: 100 }).catch(() => {});
    return active; // what is still active when the wait gives up, for the assertion to show
  }

  const moments: [string, ((e: SseEvent) => boolean) | null][] = [
    ['at once', null],
    ['right after run.started', (e) => e.event === 'run.started'],
    ['right after browser.ready', (e) => e.event === 'browser.ready'],
    ['right after the first step', (e) => e.event === 'step'],
  ];
  for (const [moment, until] of moments) {
    test(`when a run is stopped ${moment}, then it is stopped, no browser stays active and nothing is recorded after run.stopped`, async () => {
      const { id, sessionId } = await start('stops', forever());
      if (until) await readSse(await stream('stops', id), until);
      const res = await call('stops', 'POST', `${BASE}/runs/${id}/stop`);
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(((await res.json()) as { status: string }).status, 'stopped');

      assert.deepEqual(await noActiveBrowser('stops'), [], 'no browser is left active');
      // The worker has wound down (its browser is gone); read everything recorded for the run.
      const { events } = await getJson<{ events: { type: string }[] }>('stops', `${BASE}/runs/${id}/events?limit=200`);
      const types = events.map((e) => e.type);
      assert.equal(types.at(-1), 'run.stopped', `events: ${types.join(', ')}`);
      assert.equal(types.filter((t) => t === 'run.stopped').length, 1);
      assert.equal((await getJson('stops', `${BASE}/runs/${id}`)).status, 'stopped');
      assert.equal((await getJson('stops', `${BASE}/sessions/${sessionId}`)).status, 'closed');
    });
  }


});
