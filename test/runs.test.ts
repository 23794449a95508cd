/**
 * Runs end to end through the public API: every service its own process, real Chromium, real
 * gRPC and NATS, pages served by the test, the builtin model and a fake OpenAI-compatible server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fs from 'node:fs';
import path from 'node:path';
import { elementIndex, startFakeOpenAI, userText, type FakeOpenAI } from './support/fake-openai.js';
import { serveSite, type TestSite } from './support/site.js';
import { readSse, type SseEvent } from './support/sse.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const LEASE_MS = 3000;
let f: StackFixture;
let site: TestSite;
let fake: FakeOpenAI;

before(async () => {
  site = await serveSite();
  fake = await startFakeOpenAI();
  f = await startStackFixture({
    projects: ['alpha', 'limits', 'beta'],
    env: {
      ...NOT_RECORDED,
      RUN_LEASE_MS: String(LEASE_MS),
      // Not taken over (test/run-takeover.test.ts covers that): the bound's end, a run failed saying why.
      RUN_MAX_TAKEOVERS: '0',
      MAX_RUNNING_RUNS_PER_PROJECT: '2',
      MAX_ACTIVE_BROWSERS_PER_PROJECT: '40',
      DEFAULT_MODEL: 'builtin',
      OPENAI_BASE_URL: fake.baseUrl,
      OPENAI_MODELS: 'fake-gpt',
      MODEL_PRICES: JSON.stringify({ 'fake-gpt': { input: 3, output: 15 } }),
      MODEL_MAX_RETRIES: '0',
      MODEL_TIMEOUT_MS: '5000',
    },
  });
});
after(async () => {
  await f.stop();
  await fake.close();
  await site.close();
});

type Project = 'alpha' | 'limits' | 'beta';
const key = (p: Project) => f.projects[p]!.key;
const json = (p: Project, method: string, url: string, body?: unknown) =>
  f.api(url, { method, key: key(p), headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
const BASE = '/api/v1/agents/browser-agent';

interface Created {
  id: string;
  status: string;
  sessionId: string;
  stepsUrl: string;
  missingFileIds: string[];
}

async function start(p: Project, body: Record<string, unknown>): Promise<Created> {
  const res = await json(p, 'POST', `${BASE}/runs`, body);
  assert.equal(res.status, 202, await res.clone().text());
  return (await res.json()) as Created;
}

/** Follows the run's SSE stream to its terminal event, then reads the run. */
async function finished(p: Project, runId: string): Promise<{ run: Record<string, any>; events: SseEvent[] }> {
  const res = await f.api(`${BASE}/runs/${runId}/events/stream`, { key: key(p) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const events = await readSse(res);
  // A stream the server ended before the run did (its time bound) is followed on from its last event, as a client does.
  const deadline = Date.now() + 300_000;
  let run = (await (await json(p, 'GET', `${BASE}/runs/${runId}`)).json()) as Record<string, any>;
  while (['queued', 'running'].includes(run.status) && Date.now() < deadline) {
    const more = await f.api(`${BASE}/runs/${runId}/events/stream`, { key: key(p), headers: events.at(-1)?.id ? { 'last-event-id': String(events.at(-1)!.id) } : {} });
    events.push(...(await readSse(more)));
    run = (await (await json(p, 'GET', `${BASE}/runs/${runId}`)).json()) as Record<string, any>;
  }
  return { run, events };
}

describe('the builtin model end to end', () => {
  test('when asked to fill and submit a form, then the run completes with the confirmation text and recorded steps', async () => {
    const created = await start('alpha', {
      task: `Open ${site.url('run-form.html')}. Type 'Ada Lovelace' into 'Full name'. Type 'ada@example.com' into 'you@example.com'. Select 'Blue' from 'Colour'. Click 'Place order'. Wait for 'Thank you'. Extract the text of '#confirmation'.`,
      model: 'builtin',
    });
    assert.equal(created.status, 'queued');
    assert.match(created.sessionId, /^ses_/);
    assert.equal(created.stepsUrl, `${BASE}/runs/${created.id}/steps`);
    assert.deepEqual(created.missingFileIds, []);

    const { run, events } = await finished('alpha', created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'Thank you, Ada Lovelace! A blue lamp is on its way to ada@example.com.');
    assert.equal(run.output, null);
    assert.match(run.browserId, /^brw_/);
    assert.equal(run.totalCostUsd, '0');
    const types = events.map((e) => e.event);
    assert.deepEqual([types[0], types[1], types[2]], ['run.queued', 'run.started', 'browser.ready']);
    assert.equal(types.at(-1), 'run.completed');
    assert.equal(types.filter((t) => t === 'step').length, 7);
    const ready = events.find((e) => e.event === 'browser.ready')!.data.data;
    assert.equal(ready.browserId, run.browserId);
    assert.match(String(ready.liveViewUrl), /\/browsers\/brw_.*token=/);

    const steps = (await (await json('alpha', 'GET', created.stepsUrl)).json()) as { steps: Record<string, any>[]; hasMore: boolean };
    assert.deepEqual(steps.steps.map((s) => s.number), [1, 2, 3, 4, 5, 6, 7]);
    assert.match(steps.steps[0]!.action, /^navigate /);
    assert.equal(steps.steps[1]!.thought, "Type 'Ada Lovelace' into 'Full name'");
    const shot = await fetch(steps.steps[4]!.screenshotUrl);
    assert.equal(shot.status, 200);
    assert.equal(shot.headers.get('content-type'), 'image/jpeg');
    const page2 = (await (await json('alpha', 'GET', `${created.stepsUrl}?after=5`)).json()) as { steps: { number: number }[] };
    assert.deepEqual(page2.steps.map((s) => s.number), [6, 7]);
    const status = (await (await json('alpha', 'GET', `${BASE}/runs/${created.id}/status`)).json()) as Record<string, unknown>;
    assert.deepEqual(status, { status: 'completed', result: run.result, output: null, totalCostUsd: '0' });
  });

  test('when asked to extract a table, then the result parses as the rows', async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('run-table.html')}. Extract the table as JSON.`, model: 'builtin' });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(JSON.parse(run.result), [
      { Product: 'Lamp', Price: '25' },
      { Product: 'Desk', Price: '140' },
      { Product: 'Chair', Price: '60' },
    ]);
  });

  test('when a follow-up continues the session, then it reads the page the first run left open', async () => {
    const first = await start('alpha', { task: `Open ${site.url('run-links.html')}. Click the link 'The engine'.` });
    const one = await finished('alpha', first.id);
    assert.equal(one.run.status, 'completed', one.run.error);
    const second = await start('alpha', { task: 'Read the heading', session_id: first.sessionId });
    assert.equal(second.sessionId, first.sessionId);
    const two = await finished('alpha', second.id);
    assert.equal(two.run.status, 'completed', two.run.error);
    assert.equal(two.run.result, 'The Analytical Engine');
    assert.equal(two.run.browserId, one.run.browserId, 'the follow-up reused the live browser');
    const session = (await (await json('alpha', 'GET', `${BASE}/sessions/${first.sessionId}`)).json()) as Record<string, unknown>;
    assert.equal(session.status, 'open');
    assert.equal(session.latestRunId, second.id);
    assert.equal(session.busy, false);
  });

  test('when an instruction cannot be parsed, then the run fails quoting it', async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('run-table.html')}. Find the cheapest flight to Lisbon.` });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /cannot follow this step: "Find the cheapest flight to Lisbon"/);
  });

  test('when an extraction is too long for the answer, then the result says which output file holds it whole', async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('extract-long.html')} and extract the page as markdown`, model: 'builtin' });
    const { run, events } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.result, /^The extraction is \d+ characters, too long to show here: it is saved in full on the run's disk as extracts\/markdown-1\.md\. It begins:\n# Lighthouse log\n/);
    assert.deepEqual(events.filter((e) => e.event === 'file.written').map((e) => e.data.data.path), ['extracts/markdown-1.md']);
    const res = await json('alpha', 'GET', `${BASE}/runs/${id}/files?kind=output`);
    const { items } = (await res.json()) as { items: { name: string; downloadUrl: string }[] };
    assert.deepEqual(items.map((i) => i.name), ['extracts/markdown-1.md']);
    const md = await (await fetch(items[0]!.downloadUrl)).text();
    assert.match(md, /Entry 300: the lamp was lit[\s\S]*## Appendix\n\nThe keeper on duty in the great storm was Grace Darling\.$/);
  });

  test('when a run downloads a report and reads it, then the step says so, the answer is its table, and it is an output file and a browser download', async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('reports.html')}. Click 'March report'. Read the downloaded file 'march-report.csv'.`, model: 'builtin' });
    const { run, events } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(events.filter((e) => e.event === 'step' && e.data.data.downloads).map((e) => e.data.data.downloads), [[{ name: 'march-report.csv', sizeBytes: 165, contentType: 'text/csv', path: 'downloads/march-report.csv' }]]);
    assert.match(run.result, /^\| date \| description \| amount \|\n\| --- \| --- \| --- \|\n\| 2025-03-03 \| Paper, A4 \(5 reams\) \| 120\.50 \|/);
    const { steps } = (await (await json('alpha', 'GET', `${BASE}/runs/${id}/steps`)).json()) as { steps: { action: string }[] };
    assert.match(steps[1]!.action, /^click \[\d+\] → downloaded march-report\.csv \(165 bytes, text\/csv\)$/);
    const fixture = fs.readFileSync(path.join(import.meta.dirname, 'fixtures/site/reports/march-report.csv'));
    const outputs = (await (await json('alpha', 'GET', `${BASE}/runs/${id}/files?kind=output`)).json()) as { items: { name: string; downloadUrl: string }[] };
    assert.deepEqual(outputs.items.map((i) => i.name), ['downloads/march-report.csv']);
    assert.deepEqual(Buffer.from(await (await fetch(outputs.items[0]!.downloadUrl)).arrayBuffer()), fixture);
    const downloads = (await (await json('alpha', 'GET', `/api/v1/browsers/${run.browserId}/downloads`)).json()) as { items: { name: string; sizeBytes: number }[] };
    assert.deepEqual(downloads.items.map((d) => [d.name, d.sizeBytes]), [['march-report.csv', fixture.length]]);
  });

  test('when attached file ids are unknown, then 202 lists them as missing', async () => {
    const created = await start('alpha', { task: 'Extract the title', attached_file_ids: ['file_nope00000000000000000000'] });
    assert.deepEqual(created.missingFileIds, ['file_nope00000000000000000000']);
    await finished('alpha', created.id);
  });
});

describe('an OpenAI-compatible model end to end', () => {
  test('when the model drives the run, then tokens and cost are on the run', async () => {
    fake.script = (req, n) =>
      n === 0
        ? { tool: 'navigate', args: { url: site.url('run-links.html') } }
        : n === 1
          ? { tool: 'click', args: { index: elementIndex(req, /The engine/) } }
          : { tool: 'done', args: { result: 'Opened the article' } };
    const { id } = await start('alpha', { task: 'Open the engine article', model: 'fake-gpt' });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'Opened the article');
    assert.equal(run.model, 'fake-gpt');
    assert.equal(run.totalInputTokens, 300);
    assert.equal(run.totalOutputTokens, 30);
    assert.equal(run.totalCostUsd, String((300 * 3 + 30 * 15) / 1e6));
  });

  test('when the provider fails, then the run fails with a clear error', async () => {
    fake.script = () => ({ status: 500 });
    const { id } = await start('alpha', { task: 'anything', model: 'fake-gpt' });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /The model provider failed: HTTP 500/);
  });

  test('when the model keeps making malformed calls, then the run fails saying so and keeps the answer of its last done-only call in result', async () => {
    fake.script = (req) => {
      if (req.tools!.length === 1) {
        const link = /\[\d+\] link "([^"]*engine[^"]*)"/i.exec(userText(req))?.[1];
        return { tool: 'done', args: { result: `Partial: found the link "${link}" but could not open it` } };
      }
      // The requests of earlier tests count in n: the page shown decides.
      if (!/URL: \S*run-links\.html/.test(userText(req))) return { tool: 'navigate', args: { url: site.url('run-links.html') } };
      return { tool: 'click', args: { index: 'the engine one' } };
    };
    const { id } = await start('alpha', { task: 'Open the engine article', model: 'fake-gpt' });
    const { run, events } = await finished('alpha', id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /The model failed 3 times in a row; the last time: The model made a malformed tool call to "click"/);
    assert.match(run.result, /^Partial: found the link "The engine[^"]*" but could not open it$/);
    assert.equal(events.at(-1)!.event, 'run.failed');
  });

  test('when an unknown model is named, then 400 lists the models offered', async () => {
    const res = await json('alpha', 'POST', `${BASE}/runs`, { task: 'x', model: 'gpt-99' });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { detail: string }).detail, /Unknown model "gpt-99".*builtin, fake-gpt/);
  });
});

describe('a confined browser', () => {
  const secretFile = () => path.join(f.dataDir, 'file-storage', 'signing-secret');

  test("when a task asks to open a service's secret file, then the run fails saying file: URLs are blocked, and the secret is nowhere", async () => {
    const secret = fs.readFileSync(secretFile(), 'utf8').trim();
    const { id } = await start('alpha', { task: `Open file://${secretFile()}. Extract the page text.`, model: 'builtin' });
    const { run, events } = await finished('alpha', id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /file: URLs are blocked in this browser/);
    assert.ok(!JSON.stringify({ run, events }).includes(secret), 'the secret is in no answer');
  });

  test("when a task opens a service's gRPC port or cloud metadata, then the page says the network policy blocked it and nothing more", async () => {
    const grpcPort = f.stack.ports.get('run')!;
    const { id } = await start('alpha', { task: `Open http://127.0.0.1:${grpcPort}/. Extract the text of 'body'. `, model: 'builtin' });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.result, /Blocked by the browser network policy: internal service port/);
    const meta = await start('alpha', { task: `Open http://169.254.169.254/latest/meta-data/. Extract the text of 'body'.`, model: 'builtin' });
    const done = await finished('alpha', meta.id);
    assert.equal(done.run.status, 'completed', done.run.error);
    assert.match(done.run.result, /Blocked by the browser network policy: link-local/);
  });

  test('when a task opens a site the egress proxy cannot reach, then the run fails naming the host and the proxy, over http and https', async () => {
    const plain = await start('alpha', { task: 'Open http://no-such-host.invalid/. Read the heading.', model: 'builtin' });
    const tls = await start('alpha', { task: 'Open https://no-such-host.invalid/. Read the heading.', model: 'builtin' });
    const [p, t] = await Promise.all([finished('alpha', plain.id), finished('alpha', tls.id)]);
    assert.equal(p.run.status, 'failed');
    assert.equal(p.run.error, "Could not open http://no-such-host.invalid/: no-such-host.invalid could not be reached through the browser's egress proxy (cannot resolve no-such-host.invalid)");
    assert.equal(t.run.status, 'failed');
    // Chromium shows nothing of the proxy's answer to a tunnel: the code is kept for the curious.
    assert.match(t.run.error, /^Could not open https:\/\/no-such-host\.invalid\/: no-such-host\.invalid could not be reached through the browser's egress proxy: .* \(net::ERR_TUNNEL_CONNECTION_FAILED\)$/);
  });

  test("when a run has allowed domains and its page links outside them, then the click reaches nothing there and the page the run reads says why", async () => {
    const { id } = await start('alpha', {
      task: `Open ${site.url('leave-domains.html')}. Click 'Partner offers'. Extract the text of 'body'.`,
      model: 'builtin',
      browser: { allowed_domains: ['127.0.0.1'] },
    });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.result, /Blocked by the browser network policy: localhost is outside the domains this browser may reach \(127\.0\.0\.1\)/);
    assert.deepEqual(site.requests.filter((r) => r.host.startsWith('localhost')), [], 'nothing reached the site under the name outside');
    assert.ok(site.requests.some((r) => r.path === '/leave-domains.html'), 'the allowed page was served');
  });

  test('when a model opens a host file, then it sees the refusal as an action error and the run goes on to complete', async () => {
    const secret = fs.readFileSync(secretFile(), 'utf8').trim();
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: `file://${secretFile()}` } };
      // Grounded: it goes on only because the observation it was sent shows the refusal.
      if (n === 1) return /URLs are blocked in this browser/.test(userText(req)) ? { tool: 'navigate', args: { url: site.url('run-article.html') } } : { tool: 'done', args: { result: 'no refusal seen' } };
      return { tool: 'done', args: { result: userText(req).includes(secret) ? 'leaked' : 'recovered' } };
    };
    const { id } = await start('alpha', { task: 'Read the signing secret of this service', model: 'fake-gpt' });
    const { run } = await finished('alpha', id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'recovered');
    assert.ok(fake.requests.every((r) => !JSON.stringify(r).includes(secret)), 'the secret never reached the model');
  });
});

describe('stopping and sessions', () => {
  test('when a running run is stopped, then it ends stopped at once, its browser stops and its session closes', async () => {
    const created = await start('alpha', { task: `Open ${site.url('run-table.html')}. Wait for 'a text that never appears'.` });
    const stream = await f.api(`${BASE}/runs/${created.id}/events/stream`, { key: key('alpha') });
    await readSse(stream, (e) => e.event === 'step');
    const stopped = await json('alpha', 'POST', `${BASE}/runs/${created.id}/stop`);
    assert.equal(stopped.status, 200);
    const run = (await stopped.json()) as Record<string, any>;
    assert.equal(run.status, 'stopped');
    const { events } = await finished('alpha', created.id);
    assert.equal(events.at(-1)!.event, 'run.stopped');
    const browser = (await (await json('alpha', 'GET', `/api/v1/browsers/${run.browserId}`)).json()) as Record<string, unknown>;
    assert.equal(browser.status, 'stopped');
    assert.equal(browser.blockAds, true, "a run's browser blocks ads and trackers unless told not to");
    const session = (await (await json('alpha', 'GET', `${BASE}/sessions/${created.sessionId}`)).json()) as Record<string, unknown>;
    assert.equal(session.status, 'closed');

    const again = await json('alpha', 'POST', `${BASE}/runs/${created.id}/stop`);
    assert.equal(again.status, 409);
    assert.deepEqual(await again.json(), { detail: 'Run already stopped' });
    const followUp = await json('alpha', 'POST', `${BASE}/runs`, { task: 'Extract the title', session_id: created.sessionId });
    assert.equal(followUp.status, 409);
    assert.deepEqual(await followUp.json(), { detail: 'Session is closed' });
  });

  test("when a finished run's browser is stopped directly, then its session closes and a follow-up gets 409", async () => {
    const first = await start('alpha', { task: `Open ${site.url('run-table.html')}. Extract the title.` });
    const { run } = await finished('alpha', first.id);
    assert.equal(run.status, 'completed', run.error);
    const stop = await json('alpha', 'POST', `/api/v1/browsers/${run.browserId}/stop`);
    assert.equal(stop.status, 200);
    const status = await until(async () => {
      const s = ((await (await json('alpha', 'GET', `${BASE}/sessions/${first.sessionId}`)).json()) as { status: string }).status;
      return s !== 'open' && s;
    }, { timeoutMs: 10000, intervalMs: 50, what: 'the session closing' });
    assert.equal(status, 'closed');
    const followUp = await json('alpha', 'POST', `${BASE}/runs`, { task: 'Extract the title', session_id: first.sessionId });
    assert.equal(followUp.status, 409);
    assert.deepEqual(await followUp.json(), { detail: 'Session is closed' });
  });

  test('when a follow-up arrives while the session is busy, then 409 Session is busy', async () => {
    const created = await start('alpha', { task: `Open ${site.url('run-table.html')}. Wait for 'never'.` });
    const busy = await json('alpha', 'POST', `${BASE}/runs`, { task: 'Extract the title', session_id: created.sessionId });
    assert.equal(busy.status, 409);
    assert.deepEqual(await busy.json(), { detail: 'Session is busy' });
    await json('alpha', 'POST', `${BASE}/runs/${created.id}/stop`);
  });

  test('when a session id is unknown or another project’s, then 404', async () => {
    const mine = await start('alpha', { task: 'Extract the title' });
    for (const [p, sid] of [['alpha', 'ses_unknown0000000000000000000'], ['beta', mine.sessionId]] as const) {
      const res = await json(p, 'POST', `${BASE}/runs`, { task: 'x', session_id: sid });
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), { detail: 'Session not found' });
    }
    assert.equal((await json('beta', 'GET', `${BASE}/runs/${mine.id}`)).status, 404);
    await finished('alpha', mine.id);
  });

  test('when a queued run is stopped, then it is stopped without ever starting', async () => {
    // Two long runs fill project "limits" (limit 2); the third waits queued.
    const long = [await start('limits', { task: `Open ${site.url('run-table.html')}. Wait for 'never'.` }), await start('limits', { task: `Open ${site.url('run-table.html')}. Wait for 'never'.` })];
    for (const r of long) await readSse(await f.api(`${BASE}/runs/${r.id}/events/stream`, { key: key('limits') }), (e) => e.event === 'run.started');
    const queued = await start('limits', { task: 'Extract the title' });
    const stop = await json('limits', 'POST', `${BASE}/runs/${queued.id}/stop`);
    assert.equal(((await stop.json()) as { status: string }).status, 'stopped');
    const { run, events } = await finished('limits', queued.id);
    assert.equal(run.startedAt, null);
    assert.equal(run.browserId, null);
    assert.deepEqual(events.map((e) => e.event), ['run.queued', 'run.stopped']);
    for (const r of long) await json('limits', 'POST', `${BASE}/runs/${r.id}/stop`);
  });
});

describe('events', () => {
  test("when the stream of an unknown or another project's run is asked for, then 404, as on every route; a huge Last-Event-ID has seen everything", async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('run-article.html')}. Read the heading.` });
    await finished('alpha', id);
    for (const [p, runId] of [['beta', id], ['alpha', 'run_abcdefghijklmnopqrstuvwx'], ['alpha', 'nope']] as const) {
      const res = await f.api(`${BASE}/runs/${runId}/events/stream`, { key: key(p) });
      assert.equal(res.status, 404, `${p} ${runId}: ${await res.clone().text()}`);
      assert.deepEqual(await res.json(), { detail: 'Run not found' });
    }
    const none = await readSse(await f.api(`${BASE}/runs/${id}/events/stream`, { key: key('alpha'), headers: { 'Last-Event-ID': '99999999999' } }));
    assert.deepEqual(none, []);
  });

  test('when the stream is resumed from Last-Event-ID or after=, then it continues without gaps or duplicates; paging agrees', async () => {
    const { id } = await start('alpha', { task: `Open ${site.url('run-links.html')}. Click the link 'The engine'. Read the heading.` });
    const all = (await finished('alpha', id)).events;
    const ids = all.map((e) => e.id);
    assert.deepEqual(ids, Array.from({ length: ids.length }, (_, i) => i + 1));
    const resumed = await readSse(await f.api(`${BASE}/runs/${id}/events/stream`, { key: key('alpha'), headers: { 'Last-Event-ID': '3' } }));
    assert.deepEqual(resumed.map((e) => e.id), ids.slice(3));
    const viaQuery = await readSse(await f.api(`${BASE}/runs/${id}/events/stream?after=5`, { key: key('alpha') }));
    assert.deepEqual(viaQuery.map((e) => e.id), ids.slice(5));

    const paged: number[] = [];
    let after = 0;
    for (;;) {
      const page = (await (await json('alpha', 'GET', `${BASE}/runs/${id}/events?after=${after}&limit=2`)).json()) as { events: { id: number }[]; nextAfter: number; hasMore: boolean };
      paged.push(...page.events.map((e) => e.id));
      after = page.nextAfter;
      if (!page.hasMore) break;
    }
    assert.deepEqual(paged, ids);
  });
});

describe('request ids', () => {
  /** The messages `service` logged under request `id`. */
  const loggedUnder = (service: 'run' | 'browser-pool', id: string) =>
    f
      .logs(service)
      .split('\n')
      .flatMap((l) => {
        try {
          const line = JSON.parse(l.slice(l.indexOf('| ') + 2)) as { requestId?: string; msg?: string };
          return line.requestId === id ? [line.msg] : [];
        } catch {
          return [];
        }
      });

  test('when a run is created and stopped, each with its X-Request-Id, then the run service and the browser pool log each under the id of the request that caused it', async () => {
    const createId = `req-create-${Date.now()}`;
    const stopId = `req-stop-${Date.now()}`;
    const res = await f.api(`${BASE}/runs`, {
      method: 'POST',
      key: key('alpha'),
      headers: { 'content-type': 'application/json', 'x-request-id': createId },
      body: JSON.stringify({ task: `Open ${site.url('run-table.html')}. Wait for 'a text that never appears'.` }),
    });
    assert.equal(res.status, 202, await res.clone().text());
    assert.equal(res.headers.get('x-request-id'), createId);
    const created = (await res.json()) as Created;
    await readSse(await f.api(`${BASE}/runs/${created.id}/events/stream`, { key: key('alpha') }), (e) => e.event === 'step');
    const stopped = await f.api(`${BASE}/runs/${created.id}/stop`, { method: 'POST', key: key('alpha'), headers: { 'x-request-id': stopId } });
    assert.equal(stopped.status, 200);
    await finished('alpha', created.id);

    assert.ok(loggedUnder('run', createId).includes('run claimed'), `the worker logs under the creating request:\n${f.logs('run')}`);
    assert.ok(loggedUnder('browser-pool', createId).includes('browser started'), `the browser the worker asked for:\n${f.logs('browser-pool')}`);
    assert.ok(loggedUnder('run', stopId).includes('browser of a stopped run stopped'), `the stop:\n${f.logs('run')}`);
  });
});

describe('limits and failures', () => {
  // Four times the limit: most wait their turn.
  const AT_ONCE = 8;
  test(`when ${AT_ONCE} runs are created at once with a project limit of 2, then never more than 2 run and all ${AT_ONCE} complete`, async () => {
    const created = await Promise.all(Array.from({ length: AT_ONCE }, () => start('limits', { task: `Open ${site.url('run-table.html')}. Extract the title.` })));
    const results = await Promise.all(created.map((c) => finished('limits', c.id)));
    assert.deepEqual(results.map((r) => r.run.status), Array(AT_ONCE).fill('completed'));
    // Overlap from the runs' own start and finish times.
    const edges = results.flatMap((r) => [
      { t: Date.parse(r.run.startedAt), d: 1 },
      { t: Date.parse(r.run.finishedAt), d: -1 },
    ]);
    edges.sort((a, b) => a.t - b.t || a.d - b.d);
    let running = 0;
    let most = 0;
    for (const e of edges) most = Math.max(most, (running += e.d));
    assert.ok(most <= 2, `at most 2 ran at once (saw ${most})`);
    assert.equal(most, 2, 'the limit was used');
  });

  test('when the run service is killed mid-run and runs may not be taken over, then after a restart that run is failed within the lease, saying why, and others still complete', async () => {
    const victim = await start('beta', { task: `Open ${site.url('run-table.html')}. Wait for 'never'.` });
    await readSse(await f.api(`${BASE}/runs/${victim.id}/events/stream`, { key: key('beta') }), (e) => e.event === 'step');
    const killedAt = Date.now();
    await f.stack.kill('run');
    await f.stack.startService('run');
    const back = Date.now();
    const { run } = await finished('beta', victim.id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /lease expired\), and runs are not taken over by another worker here \(RUN_MAX_TAKEOVERS=0\)/);
    // Nobody can fail it while the only run service is down; once one is back, within a reaper cycle.
    const due = Math.max(killedAt + LEASE_MS, back) + LEASE_MS;
    assert.ok(Date.parse(run.finishedAt) <= due, `failed by ${new Date(due).toISOString()} (killed ${new Date(killedAt).toISOString()}, back ${new Date(back).toISOString()}, failed ${run.finishedAt})`);
    const browser = (await (await json('beta', 'GET', `/api/v1/browsers/${run.browserId}`)).json()) as Record<string, unknown>;
    assert.equal(browser.runId ?? null, null, 'its browser was released');

    const other = await start('beta', { task: `Open ${site.url('run-table.html')}. Extract the title.` });
    assert.equal((await finished('beta', other.id)).run.status, 'completed');
    const running = (await (await json('beta', 'GET', `${BASE}/runs?status=running`)).json()) as { items: unknown[] };
    assert.deepEqual(running.items, []);
  });
});
