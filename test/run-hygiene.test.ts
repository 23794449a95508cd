/**
 * Runs end whatever goes wrong under them, and never keep a worker slot: a file over the size
 * limit, binary command output, a stop while a step hangs, a browser pool that is down or
 * crashes. The run service has one worker slot here, so a next run completing proves it free.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { BROWSER_LOST_ERROR } from '../services/run/src/run-bounds.js';
import { serveSite, type TestSite } from './support/site.js';
import { readSse, type SseEvent } from './support/sse.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

const STOP_GRACE_MS = 2000;
const MAX_OUTPUT_FILES = 5;
const WORK_DIR = tempDir('hygiene-work');
let f: StackFixture;
let site: TestSite;

before(async () => {
  site = await serveSite();
  f = await startStackFixture({
    env: {
      ...NOT_RECORDED,
      DEFAULT_MODEL: 'builtin',
      RUN_WORKER_CONCURRENCY: '1',
      RUN_STOP_GRACE_MS: String(STOP_GRACE_MS),
      FILE_SIZE_LIMIT_BYTES: String(1024 * 1024),
      RUN_WORK_DIR: WORK_DIR,
      SHELL_MAX_DISK_MB: '32',
      RUN_MAX_OUTPUT_FILES: String(MAX_OUTPUT_FILES),
    },
  });
});
after(async () => {
  await f.stop();
  await site.close();
  fs.rmSync(WORK_DIR, { recursive: true, force: true });
});

type Agent = 'browser-agent' | 'browsercode';
const base = (agent: Agent) => `/api/v1/agents/${agent}/runs`;

async function start(agent: Agent, task: string): Promise<string> {
  const res = await f.api(base(agent), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task, model: 'builtin' }) });
  assert.equal(res.status, 202, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

/** The run's events until its end (or `until`), and the run as it then reads. */
async function follow(agent: Agent, id: string, until?: (e: SseEvent) => boolean): Promise<{ run: Record<string, any>; events: SseEvent[] }> {
  const res = await f.api(`${base(agent)}/${id}/events/stream`);
  assert.equal(res.status, 200);
  const events = await readSse(res, until);
  const run = (await (await f.api(`${base(agent)}/${id}`)).json()) as Record<string, any>;
  return { run, events };
}

const ofType = (events: SseEvent[], type: string) => events.filter((e) => e.event === type).map((e) => e.data.data);
const pid = (service: 'browser-pool') => f.stack.children.get(service)!.pid!;

describe('runs that cannot hang', () => {
  test('when a command writes a file over the size limit and prints binary bytes, then the run ends reporting the skipped file and the next run gets the slot', async () => {
    const id = await start('browsercode', "Run `head -c 3000000 /dev/zero > big.bin; echo small > small.txt; printf 'a\\000b\\377c\\n'`.");
    const { run, events } = await follow('browsercode', id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(ofType(events, 'file.skipped'), [{ path: 'big.bin', reason: 'big.bin is larger than the file size limit of 1048576 bytes' }]);
    assert.deepEqual(ofType(events, 'file.written').map((w) => w.path), ['small.txt']);
    // Bytes that are not text are kept visible (NUL as ␀ where a column cannot hold it; invalid UTF-8 as U+FFFD).
    const printed = ofType(events, 'terminal.output').map((d) => String(d.chunk)).join('');
    assert.match(printed, /a[\u0000\u2400]b\ufffdc/);
    assert.match(run.result, /a[\u0000\u2400]b\ufffdc/);

    const next = await start('browsercode', 'Run `echo next`.');
    const { run: after } = await follow('browsercode', next);
    assert.equal(after.status, 'completed', after.error);
    assert.equal(after.result, 'next');
  });

  test("when a command writes more files than a run's output file limit, then only that many are stored, one file.skipped says how many were not, and the run's files come a page at a time", async () => {
    const id = await start('browsercode', 'Run `for i in 1 2 3 4 5 6 7 8; do echo $i > f$i.txt; done`.');
    const { run, events } = await follow('browsercode', id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(ofType(events, 'file.written').map((w) => w.path), ['f1.txt', 'f2.txt', 'f3.txt', 'f4.txt', 'f5.txt']);
    assert.deepEqual(ofType(events, 'file.skipped'), [{ path: 'f6.txt', reason: `the run reached its limit of ${MAX_OUTPUT_FILES} output files: 3 more files were not stored`, count: 3 }]);

    // Paged like every list: limit 2 gives 2, 2, 1, each page pointing at the next.
    const names: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await f.api(`${base('browsercode')}/${id}/files?kind=output&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(res.status, 200);
      const page = (await res.json()) as { items: { name: string }[]; nextCursor: string | null; hasMore: boolean };
      assert.equal(page.hasMore, page.nextCursor !== null);
      names.push(...page.items.map((i) => i.name));
      sizes.push(page.items.length);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(sizes, [2, 2, 1]);
    assert.deepEqual(names, ['f1.txt', 'f2.txt', 'f3.txt', 'f4.txt', 'f5.txt']);
    const bad = await f.api(`${base('browsercode')}/${id}/files?limit=0`);
    assert.equal(bad.status, 422);
  });

  test('when a run is stopped while its step hangs on a frozen browser pool, then it is stopped and the next run starts within the grace', async () => {
    const id = await start('browsercode', `Open ${site.url('run-table.html')}. Extract the table as JSON.`);
    await follow('browsercode', id, (e) => e.event === 'browser.ready');
    process.kill(pid('browser-pool'), 'SIGSTOP'); // every pool call and CDP command of the run now hangs
    try {
      const stopped = await f.api(`${base('browsercode')}/${id}/stop`, { method: 'POST' });
      assert.equal(stopped.status, 200, await stopped.clone().text());
      assert.equal(((await stopped.json()) as { status: string }).status, 'stopped');
      const stoppedAt = Date.now();

      const next = await start('browsercode', 'Run `echo after the stuck one`.');
      const { run } = await follow('browsercode', next);
      assert.equal(run.status, 'completed', run.error);
      const waited = Date.parse(run.startedAt) - stoppedAt;
      assert.ok(waited < STOP_GRACE_MS + 8000, `the next run started ${waited} ms after the stop`);
    } finally {
      process.kill(pid('browser-pool'), 'SIGCONT');
    }
  });

  test('when the browser pool is down as a run starts, then the run waits for it and completes', async () => {
    await f.stack.kill('browser-pool');
    const id = await start('browser-agent', `Open ${site.url('run-table.html')}. Extract the table as JSON.`);
    // Claimed: a browser-agent run asks for its browser before run.started, so it is now waiting out the outage.
    await until(async () => ((await (await f.api(`${base('browser-agent')}/${id}`)).json()) as { status: string }).status !== 'queued', { intervalMs: 50, what: 'the run claimed' });
    await f.stack.startService('browser-pool'); // a few seconds of outage while it starts
    const { run, events } = await follow('browser-agent', id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(ofType(events, 'browser.ready').length, 1);
  });

  test('when the browser pool crashes during a run, then the run fails saying the browser stopped unexpectedly', async () => {
    const id = await start('browser-agent', `Open ${site.url('run-table.html')}. Wait 20 seconds. Extract the table as JSON.`);
    await follow('browser-agent', id, (e) => e.event === 'step');
    await f.stack.kill('browser-pool');
    try {
      const { run, events } = await follow('browser-agent', id);
      assert.equal(run.status, 'failed');
      assert.equal(run.error, BROWSER_LOST_ERROR);
      assert.equal(events.at(-1)?.event, 'run.failed');
    } finally {
      await f.stack.startService('browser-pool'); // reaps what the crashed pool left
    }
  });
});
