/**
 * The TypeScript SDK (clients/typescript, imported by its package name as a user does) against a
 * real stack: every resource and helper, streams cut midway, a gateway that dies and comes back,
 * each error class; its examples run as programs; its types (no `any`, generated from the API,
 * not stale); its bundle in a real browser; and an install from its folder into another project.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as esbuild from 'esbuild';
import {
  AgentTaskService,
  AgentTaskServiceError,
  APIConnectionError,
  APIError,
  APIStatusError,
  APITimeoutError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
  RunTimeoutError,
  UnprocessableEntityError,
  verifyWebhook,
  type BrowserHandle,
  type ClientOptions,
  type Event,
  type Fetch,
} from '@agent-task-service/client';
import { apiDocument, GENERATED_FILE, renderTypes } from '../clients/typescript/scripts/generate.js';
import { toSnake } from '../clients/typescript/src/casing.js';
import { parseSse } from '../clients/typescript/src/sse.js';
import { startClientHarness, type ClientHarness } from './support/client-harness.js';
import { launchTestChromium } from './support/test-chromium.js';
import { findAny } from './support/public-types.js';
import { until } from './support/until.js';
import { startWebhookReceiver } from './support/webhook-receiver.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PKG = path.join(ROOT, 'clients/typescript');
const run = promisify(execFile);
/**
 * Active browsers per project: low, so that a 429 is cheap to reach, and enough for the examples'
 * three chains with one to spare: a browser a chain let go of can still count for a moment (on a
 * machine running twice as slow, the profile example's second browser got a 429 at four).
 */
const BROWSER_LIMIT = 5;

let h: ClientHarness;
let site: string;
/** A client of the test's project, through the cutting proxy, with `options` on top. */
const client = (options: ClientOptions = {}) => new AgentTaskService({ apiKey: h.env.ATS_API_KEY, baseUrl: h.env.ATS_BASE_URL, ...options });
/** Fails with the error's class name when `promise` does not reject with an instance of `cls`. */
async function rejectsWith<E extends Error>(promise: Promise<unknown>, cls: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
    return err;
  }
  assert.fail(`expected ${cls.name}, but it resolved`);
}
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'ats-ts-'));

/** The newest modification time under `dir`. */
function newest(dir: string): number {
  return Math.max(...fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).map((e) => fs.statSync(path.join(e.parentPath, e.name)).mtimeMs));
}

before(async () => {
  // The tests import the package as its users do: its built dist/.
  assert.ok(fs.existsSync(path.join(PKG, 'dist/index.js')) && newest(path.join(PKG, 'dist')) >= newest(path.join(PKG, 'src')), 'clients/typescript/dist is missing or older than src: run make build');
  // Loopback receivers: the webhook test listens on 127.0.0.1.
  h = await startClientHarness({ env: { DEFAULT_MODEL: 'builtin', MAX_ACTIVE_BROWSERS_PER_PROJECT: String(BROWSER_LIMIT), WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  site = h.env.ATS_TEST_SITE;
});
after(async () => {
  await h?.stop();
});

describe('the TypeScript SDK against the stack', () => {
  let tableRun: string;
  let stoppedBrowser: string;

  test('when a builtin run is created, then wait returns it completed with the answer, and get, status, steps, events, stream, list and the session agree', async () => {
    const c = client({ baseUrl: `${h.env.ATS_BASE_URL}/api/v1/` }); // a base URL given with /api/v1 works too
    const offered = await c.models.list();
    assert.deepEqual(offered.models.filter((m) => m.default).map((m) => m.name), [offered.default], 'the models list names its default');
    assert.ok(offered.models.some((m) => m.name === 'builtin' && m.provider === 'builtin'));
    const created = await c.runs.create({ task: `Open ${site}/run-table.html. Extract the table as JSON.` });
    assert.equal(created.status, 'queued');
    assert.equal(created.agent, 'browser-agent');
    tableRun = created.id;

    const done = await c.runs.wait(created.id);
    assert.equal(done.status, 'completed', done.error ?? '');
    assert.deepEqual(JSON.parse(done.result!)[0], { Product: 'Lamp', Price: '25' });
    assert.equal((await c.runs.get(created.id)).result, done.result);
    const status = await c.runs.status(created.id);
    assert.deepEqual([status.status, status.result], ['completed', done.result]);

    const steps = await c.runs.steps(created.id, { limit: 1 }).toArray();
    assert.deepEqual(
      steps.map((s) => s.number),
      steps.map((_, i) => i + 1),
    );
    assert.ok(steps.length >= 2, 'the run opened a page and extracted');
    const events = await c.runs.events(created.id, { limit: 2 }).toArray(); // page by page
    assert.deepEqual(events.map((e) => e.type).slice(0, 2), ['run.queued', 'run.started']);
    assert.equal(events.at(-1)!.type, 'run.completed');
    const streamed: Event[] = [];
    for await (const e of c.runs.stream(created.id)) streamed.push(e); // the run has ended: backlog, then the end
    assert.deepEqual(streamed, events);
    const later: Event[] = [];
    for await (const e of c.runs.stream(created.id, { after: events.at(-2)!.id })) later.push(e);
    assert.deepEqual(later, events.slice(-1));

    const listed = await c.runs.list({ sessionId: created.sessionId }).toArray();
    assert.deepEqual(
      listed.map((r) => r.id),
      [created.id],
    );
    const session = await c.sessions.get(created.sessionId);
    assert.equal(session.latestRunId, created.id);
    assert.ok((await c.sessions.list().toArray()).some((s) => s.id === created.sessionId));
  });

  test('when files are given to a run, then they are uploaded and attached, the code agent reads them, and its output files download to disk and as bytes', async () => {
    const c = client();
    const dir = tmp();
    const notes = path.join(dir, 'notes.txt');
    fs.writeFileSync(notes, `first ${process.pid}\nsecond\n`);
    const extra = await c.files.upload(new TextEncoder().encode('from bytes\n'), { agent: 'browsercode', name: 'extra.txt' });
    assert.equal(extra.name, 'extra.txt');
    const created = await c.runs.create({
      agent: 'browsercode',
      task: 'Run `cat notes.txt`. Run `cat notes.txt extra.txt file.txt blob.txt | tr a-z A-Z > shout.txt`.',
      files: [notes, new File(['from a file\n'], 'file.txt'), { name: 'blob.txt', content: new Blob(['from a blob\n']) }],
      attachedFileIds: [extra.id],
    });
    assert.deepEqual(created.missingFileIds, []);
    const done = await c.runs.wait(created.id, { agent: 'browsercode' });
    assert.equal(done.status, 'completed', done.error ?? '');
    const output = (await c.runs.events(created.id, { agent: 'browsercode' }).toArray())
      .filter((e) => e.type === 'terminal.output')
      .map((e) => String(e.data.chunk))
      .join('');
    assert.match(output, new RegExp(`first ${process.pid}\\nsecond`), 'the run read the uploaded file');

    const inputs = await c.runs.files(created.id, { agent: 'browsercode', kind: 'input' });
    assert.deepEqual(inputs.map((f) => f.name).sort(), ['blob.txt', 'extra.txt', 'file.txt', 'notes.txt']);
    const [shout] = await c.runs.files(created.id, { agent: 'browsercode', kind: 'output' });
    assert.equal(shout?.name, 'shout.txt');
    const expected = `FIRST ${process.pid}\nSECOND\nFROM BYTES\nFROM A FILE\nFROM A BLOB\n`;
    const written = await shout.download({ to: dir });
    assert.equal(written, path.join(dir, 'shout.txt'));
    assert.equal(fs.readFileSync(written, 'utf8'), expected);
    assert.equal(await shout.text(), expected);
    assert.equal(new TextDecoder().decode(await c.files.download(shout)), expected);
    const elsewhere = path.join(dir, 'sub', 'renamed.txt');
    assert.equal(await c.files.download(shout.downloadUrl, { to: elsewhere }), elsewhere);
    assert.equal(fs.readFileSync(elsewhere, 'utf8'), expected);
    assert.equal(JSON.parse(JSON.stringify(shout)).name, 'shout.txt', 'a file prints as its fields');

    const raw = await c.files.create(['raw.txt'], { agent: 'browsercode' });
    assert.equal(raw[0]!.name, 'raw.txt');
    assert.match(raw[0]!.upload_url, /^http/);
    await assert.rejects(c.files.upload(new Uint8Array([1])), /Bytes need a name/);
  });

  test('when the connection of an event stream is cut midway, then the stream resumes from the last event (Last-Event-ID): none repeated, none lost, ending with the terminal event', async () => {
    const resumedFrom: (string | null)[] = [];
    const tracing: Fetch = (input, init) => {
      if (String(input).includes('/events/stream')) resumedFrom.push(new Headers(init?.headers).get('last-event-id'));
      return fetch(input, init);
    };
    const c = client({ fetch: tracing });
    const created = await c.runs.create({ agent: 'browsercode', task: 'Run `echo one`. Run `sleep 2`. Run `echo two`. Run `echo three`.' });
    const seen: Event[] = [];
    let cutAt: number | undefined;
    for await (const e of c.runs.stream(created.id, { agent: 'browsercode' })) {
      seen.push(e);
      if (cutAt === undefined) {
        cutAt = e.id;
        assert.ok(h.cut() >= 1, 'the stream was open through the proxy');
      }
    }
    // Events already received with the first may still be read after the cut: it resumes after the last one read.
    assert.equal(resumedFrom.length, 2, 'connected once more');
    assert.equal(resumedFrom[0], null);
    const resumedAfter = Number(resumedFrom[1]);
    assert.ok(resumedAfter >= cutAt! && seen.some((e) => e.id === resumedAfter), `resumed after ${resumedFrom[1]}`);
    const listed = await c.runs.events(created.id, { agent: 'browsercode' }).toArray();
    assert.deepEqual(
      seen.map((e) => e.id),
      listed.map((e) => e.id),
    );
    assert.deepEqual(seen, listed);
    assert.equal(seen.at(-1)!.type, 'run.completed');
    assert.ok(seen.filter((e) => e.id > resumedAfter).length >= 3, 'events came over the second connection');
  });

  test('when lists span several pages, then the iterators walk every page once and firstPage/nextPage give the pages', async () => {
    const c = client();
    const names = ['p-one', 'p-two', 'p-three', 'p-four', 'p-five'];
    const made = [];
    for (const name of names) made.push(await c.profiles.create({ name, userId: 'user-7' }));
    assert.equal(made[0]!.userId, 'user-7');
    const first = await c.profiles.list({ limit: 2 }).firstPage();
    assert.equal(first.items.length, 2);
    assert.equal(first.hasNextPage(), true);
    const second = await first.nextPage();
    assert.equal(second!.items.length, 2);
    const sizes: number[] = [];
    for await (const page of c.profiles.list({ limit: 2 }).pages()) sizes.push(page.items.length);
    assert.ok(sizes.length >= 3 && sizes.every((n) => n <= 2), `pages of ${sizes.join(', ')}`);
    const all = await c.profiles.list({ limit: 2 }).toArray();
    assert.equal(all.length, sizes.reduce((a, b) => a + b));
    assert.equal(new Set(all.map((p) => p.id)).size, all.length, 'no profile twice');
    for (const p of made) assert.ok(all.some((q) => q.id === p.id));
    assert.equal((await c.profiles.update(made[0]!.id, { name: 'renamed' })).name, 'renamed');
    assert.equal((await c.profiles.get(made[0]!.id)).name, 'renamed');
    for (const p of made) await c.profiles.delete(p.id);
    await c.profiles.delete(made[0]!.id); // deleting again is fine
    await rejectsWith(c.profiles.get(made[0]!.id), NotFoundError);

    const runsOnePerPage = await c.runs.list({ agent: 'browsercode', limit: 1 }).toArray();
    const runsOnePage = (await c.runs.list({ agent: 'browsercode', limit: 200 }).firstPage()).items;
    assert.ok(runsOnePage.length >= 2);
    assert.deepEqual(
      runsOnePerPage.map((r) => r.id),
      runsOnePage.map((r) => r.id),
    );
    assert.deepEqual(await c.runs.list({ agent: 'browsercode', limit: 1 }).toArray(1), runsOnePage.slice(0, 1));

    const workspaces = [await c.workspaces.create({ name: 'ws-a' }), await c.workspaces.create({ name: 'ws-b' }), await c.workspaces.create({ name: 'ws-c' })];
    const listed = await c.workspaces.list({ limit: 2 }).toArray();
    for (const w of workspaces) assert.ok(listed.some((x) => x.id === w.id));
    assert.equal((await c.workspaces.update(workspaces[0]!.id, { name: 'ws-a2' })).name, 'ws-a2');
    assert.equal((await c.workspaces.get(workspaces[0]!.id)).name, 'ws-a2');
    for (const name of ['a.txt', 'b.txt', 'c.txt']) await c.workspaces.upload(workspaces[0]!.id, { name, content: `content of ${name}` });
    const files = await c.workspaces.files(workspaces[0]!.id, { limit: 2 }).toArray();
    assert.deepEqual(files.map((f) => f.name).sort(), ['a.txt', 'b.txt', 'c.txt']);
    assert.equal(await files.find((f) => f.name === 'b.txt')!.text(), 'content of b.txt');
    for (const w of workspaces) await c.workspaces.delete(w.id);
    await rejectsWith(c.workspaces.get(workspaces[0]!.id), NotFoundError);
  });

  test('when a webhook is created, pinged, redelivered, rotated, listed, updated and deleted, then the receiver verifies each ping with the secret the SDK returned', async () => {
    const c = client();
    const receiver = await startWebhookReceiver();
    try {
      const hook = await c.webhooks.create({ url: receiver.url, eventTypes: ['run.failed'], description: 'ts sdk' });
      assert.ok(hook.secret.startsWith('whsec_'));
      assert.deepEqual([hook.eventTypes, hook.enabled, hook.description], [['run.failed'], true, 'ts sdk']);
      // The examples' runs send their own events to other webhooks of the project: pick ours by event id.
      const received = (eventId: string) => receiver.seen((r) => r.headers['webhook-id'] === eventId);

      const ping = await c.webhooks.test(hook.id);
      const got = await received(ping.eventId);
      const event = await verifyWebhook<{ type: string; data: { webhookId: string } }>(hook.secret, got.body, got.headers);
      assert.deepEqual([event.type, event.data.webhookId, ping.webhookId], ['webhook.test', hook.id, hook.id]);

      const redelivered = receiver.next((r) => r.headers['webhook-id'] === ping.eventId); // listening before it is triggered
      const again = await c.webhooks.redeliver(hook.id, ping.id);
      assert.deepEqual([again.eventId, again.id !== ping.id], [ping.eventId, true]);
      const second = await redelivered;
      assert.equal((await verifyWebhook(hook.secret, second.body, second.headers)).id, ping.eventId);
      const deliveries = await c.webhooks.deliveries(hook.id, { limit: 1 }).toArray();
      assert.deepEqual(deliveries.map((d) => d.id).filter((id) => id === ping.id || id === again.id).sort(), [ping.id, again.id].sort());

      const rotated = await c.webhooks.rotateSecret(hook.id, { overlapSeconds: 600 });
      assert.ok(rotated.secret !== hook.secret && rotated.previousSecretExpiresAt !== null);
      const later = await received((await c.webhooks.test(hook.id)).eventId);
      // During the overlap both secrets sign: a receiver holding either accepts the delivery.
      for (const secret of [rotated.secret, hook.secret]) assert.equal((await verifyWebhook(secret, later.body, later.headers)).type, 'webhook.test');

      const other = await c.webhooks.create({ url: receiver.url, enabled: false });
      const listed = await c.webhooks.list({ limit: 1 }).toArray();
      assert.ok([hook.id, other.id].every((id) => listed.some((w) => w.id === id)));
      const changed = await c.webhooks.update(hook.id, { enabled: false, eventTypes: ['run.completed', 'run.stopped'] });
      assert.deepEqual([changed.enabled, changed.eventTypes], [false, ['run.completed', 'run.stopped']]);
      assert.equal((await c.webhooks.get(hook.id)).enabled, false);
      for (const id of [hook.id, other.id]) await c.webhooks.delete(id);
      await rejectsWith(c.webhooks.get(hook.id), NotFoundError);
    } finally {
      await receiver.close();
    }
  });

  test('when a browser is declared with await using, then it is stopped when the scope ends; its live view link and downloads are there', async () => {
    const c = client();
    let id = '';
    {
      await using browser = await c.browsers.create({ screenWidth: 1024, screenHeight: 768, timeoutMinutes: 5 });
      id = browser.id;
      assert.equal(browser.status, 'active');
      assert.equal(browser.screenWidth, 1024);
      assert.match(browser.cdpUrl!, /^ws/);
      assert.ok((await c.browsers.list({ status: 'active' }).toArray()).some((b) => b.id === id));
      const link = await browser.liveViewLink({ mode: 'view', expiresInSeconds: 120 });
      assert.match(link.url, new RegExp(`/browsers/${id}\\?`));
      assert.deepEqual(await c.browsers.downloads(id), []);
    }
    const stopped = await c.browsers.get(id);
    assert.equal(stopped.status, 'stopped');
    assert.equal((await stopped.stop()).status, 'stopped', 'stopping again is fine');
    stoppedBrowser = id; // its recording is fetched later, once finished
  });

  test('when the API refuses a call, then the error class, status, detail and request id say why, and the message never holds the key', async () => {
    const c = client();
    const errors: APIError[] = [];
    const keep = <E extends APIError>(e: E) => (errors.push(e), e);

    const auth = keep(await rejectsWith(client({ apiKey: 'ats_not_a_real_key' }).agents.list(), AuthenticationError));
    assert.equal(auth.status, 401);
    assert.equal(auth.detail, 'Invalid or missing API key');
    assert.ok(auth.requestId, 'the request id is carried');
    assert.ok(auth.message.includes(auth.requestId!) && auth.message.includes('401') && auth.message.includes(auth.detail!), auth.message);
    assert.ok(auth instanceof APIStatusError && auth instanceof APIError && auth instanceof AgentTaskServiceError);

    const missing = keep(await rejectsWith(c.runs.get('run_doesnotexist'), NotFoundError));
    assert.equal(missing.detail, 'Run not found');
    const other = new AgentTaskService({ apiKey: h.env.ATS_TEST_OTHER_KEY, baseUrl: h.env.ATS_BASE_URL });
    keep(await rejectsWith(other.runs.get(tableRun), NotFoundError)); // another project's run does not exist for it

    const ended = keep(await rejectsWith(c.runs.stop(tableRun), ConflictError));
    assert.equal(ended.detail, 'Run already completed');

    const invalid = keep(await rejectsWith(c.runs.create({ task: '' }), UnprocessableEntityError));
    assert.equal(invalid.status, 422);
    assert.deepEqual(
      invalid.errors.map((e) => [e.type, e.loc]),
      [['string_too_short', ['body', 'task']]],
    );
    assert.match(invalid.message, /body\.task: String should have at least 1 character/);
    const halfScreen = keep(await rejectsWith(c.runs.create({ task: 'x', browser: { screenWidth: 800 } }), UnprocessableEntityError));
    assert.deepEqual(halfScreen.errors[0]!.loc, ['body', 'browser']);
    assert.match(halfScreen.errors[0]!.msg, /screen_height/);

    const bad = keep(await rejectsWith(c.runs.create({ task: 'x', workspaceId: 'wsp_whatever' }), BadRequestError));
    assert.equal(bad.detail, 'workspace_id is only supported by the browsercode agent');

    const held: BrowserHandle[] = [];
    try {
      held.push(...(await Promise.all(Array.from({ length: BROWSER_LIMIT }, () => c.browsers.create()))));
      const limited = keep(await rejectsWith(c.browsers.create(), RateLimitError));
      assert.equal(limited.status, 429);
      assert.ok(limited.retryAfter !== null && limited.retryAfter > 0, `Retry-After: ${limited.retryAfter}`);
    } finally {
      await Promise.all(held.map((b) => b.stop()));
    }

    const workspace = await c.workspaces.create({ name: 'signed' });
    await c.workspaces.upload(workspace.id, { name: 'signed.txt', content: 'x' });
    const [signed] = await c.workspaces.files(workspace.id).toArray();
    const tampered = signed!.downloadUrl.replace(/sig=[^&]+/, 'sig=AAAA');
    const forbidden = keep(await rejectsWith(c.files.download(tampered), APIStatusError));
    assert.equal(forbidden.constructor, APIStatusError, 'a status with no class of its own');
    assert.equal(forbidden.status, 403);
    assert.ok(!forbidden.message.includes('sig='), 'a presigned link is printed without its signature');
    await c.workspaces.delete(workspace.id);

    for (const e of errors) {
      for (const text of [e.message, String(e), e.stack ?? '']) assert.ok(!text.includes(h.env.ATS_API_KEY) && !text.includes(h.env.ATS_TEST_OTHER_KEY), text);
    }
  });

  test('when a run does not end in time, then wait throws a RunTimeoutError naming it; stopping it twice is a ConflictError', async () => {
    const c = client();
    const created = await c.runs.create({ task: `Open ${site}/run-table.html. Wait for 'a text that never appears'.` });
    const late = await rejectsWith(c.runs.wait(created.id, { timeoutMs: 300, pollIntervalMs: 100 }), RunTimeoutError);
    assert.equal(late.runId, created.id);
    assert.match(late.message, new RegExp(`Run ${created.id} did not end within 300 ms \\(still (queued|running)\\)`));
    assert.equal((await c.runs.stop(created.id)).status, 'stopped');
    await rejectsWith(c.runs.stop(created.id), ConflictError);
  });

  test('when nothing answers, then reads and creates are retried max_retries times and fail as APIConnectionError or APITimeoutError; each try of a create carries one Idempotency-Key (its own unless given), reads none', async () => {
    const refused = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as net.AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const down = client({ baseUrl: `http://127.0.0.1:${refused}`, maxRetries: 1 });
    const conn = await rejectsWith(down.agents.list(), APIConnectionError);
    assert.ok(!(conn instanceof APITimeoutError));
    assert.equal(conn.status, undefined);
    assert.match(conn.message, /Connection error — GET \/api\/v1\/agents \(ECONNREFUSED\)/);

    let requests = 0;
    const idempotencyKeys: (string | undefined)[] = [];
    const silent = http.createServer((req) => void (requests++, idempotencyKeys.push(req.headers['idempotency-key'] as string | undefined)));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const slow = client({ baseUrl: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`, timeoutMs: 300, maxRetries: 2 });
      const timedOut = await rejectsWith(slow.runs.list().firstPage(), APITimeoutError);
      assert.match(timedOut.message, /timed out after 300 ms — GET \/api\/v1\/agents\/browser-agent\/runs/);
      assert.equal(requests, 3, 'the first try and two retries');
      assert.deepEqual(idempotencyKeys, [undefined, undefined, undefined], 'a read carries no key');
      idempotencyKeys.length = 0;
      await rejectsWith(slow.runs.create({ task: 'x' }), APITimeoutError);
      await rejectsWith(slow.browsers.create(), APITimeoutError);
      const [run, browser] = [idempotencyKeys.slice(0, 3), idempotencyKeys.slice(3)];
      assert.equal(idempotencyKeys.length, 6, 'each create: the first try and two retries');
      assert.match(run[0] ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUID of its own');
      assert.deepEqual(run, [run[0], run[0], run[0]], 'the same key on every try of one create');
      assert.deepEqual(browser, [browser[0], browser[0], browser[0]]);
      assert.notEqual(browser[0], run[0], 'another create, another key');
      idempotencyKeys.length = 0;
      await rejectsWith(slow.runs.create({ task: 'x', idempotencyKey: 'order-4711' }), APITimeoutError);
      assert.deepEqual(idempotencyKeys, ['order-4711', 'order-4711', 'order-4711'], 'with an Idempotency-Key a create is retried like a read, each try with the key');
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  test('when the answer to a create is lost, then the SDK tries again with the same Idempotency-Key and gets the run the first try made; no second run is made', async () => {
    const task = `Answer lost on the way ${Date.now()}`;
    let first: { id?: string } | undefined;
    let replayed: string | null = null;
    const losing: Fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method !== 'POST') return res;
      if (!first) {
        first = (await res.json()) as { id?: string };
        throw new TypeError('fetch failed: the connection was cut'); // the run was made; its answer never came
      }
      replayed = res.headers.get('idempotent-replayed');
      return res;
    };
    const created = await client({ fetch: losing }).runs.create({ task, model: 'builtin' });
    assert.ok(first?.id);
    assert.equal(created.id, first.id);
    assert.equal(replayed, 'true', 'the retry got the first answer back');
    const c = client();
    const same: string[] = [];
    for await (const r of c.runs.list({ limit: 200 })) if (r.task === task) same.push(r.id);
    assert.deepEqual(same, [first.id], 'one run');
    await c.runs.wait(first.id, { timeoutMs: 60_000 }).catch(() => undefined); // ended before the next test kills the gateway
  });

  test('when the gateway dies and comes back, then a read rides over it (retried after the first connection error); a create meanwhile is retried under one key, then fails', async () => {
    await h.fixture.stack.kill('gateway');
    const keys: (string | null)[] = [];
    const counting: Fetch = (input, init) => (keys.push(new Headers(init?.headers).get('idempotency-key')), fetch(input, init));
    await rejectsWith(client({ fetch: counting, maxRetries: 1 }).runs.create({ task: 'x' }), APIConnectionError);
    assert.equal(keys.length, 2);
    assert.ok(keys[0]);
    assert.equal(keys[1], keys[0]);

    let failures = 0;
    let restart: Promise<void> | undefined;
    const restarting: Fetch = async (input, init) => {
      try {
        return await fetch(input, init);
      } catch (err) {
        failures++;
        restart ??= h.fixture.stack.startService('gateway');
        await restart; // the gateway is back before the client sees its first error
        throw err;
      }
    };
    const agents = await client({ fetch: restarting }).agents.list();
    assert.deepEqual(
      agents.map((a) => a.name),
      ['browser-agent', 'browsercode'],
    );
    assert.equal(failures, 1, 'one connection error, then the retry got through');
  });

  test('when a service behind the gateway is down (503), then a read is retried until it is back; with no retries it is an InternalServerError', async () => {
    await h.fixture.stack.kill('run');
    const down = await rejectsWith(client({ maxRetries: 0 }).runs.list().firstPage(), InternalServerError);
    assert.equal(down.status, 503);
    assert.ok(down.detail && down.requestId, down.message);

    let unavailable = 0;
    let restart: Promise<void> | undefined;
    const restarting: Fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (res.status === 503) {
        unavailable++;
        restart ??= h.fixture.stack.startService('run');
        await restart;
      }
      return res;
    };
    const page = await client({ fetch: restarting, maxRetries: 4 }).runs.list({ limit: 1 }).firstPage();
    assert.ok(unavailable >= 1);
    assert.equal(page.items.length, 1);
  });

  test("when a stopped browser's video is finished, then recording gives its link (a ConflictError until then)", async () => {
    const c = client();
    const recording = await until(
      async () => {
        try {
          return await c.browsers.recording(stoppedBrowser);
        } catch (err) {
          if (err instanceof ConflictError) return undefined; // still being finished
          throw err;
        }
      },
      { what: 'the recording', intervalMs: 200 },
    );
    assert.match(recording.url, /^http/);
    assert.ok(Date.parse(recording.expiresAt) > Date.now());
  });
});

describe('the TypeScript SDK as shipped', () => {
  test('when the examples run against the stack, then each prints what its README section promises', async () => {
    const exec = async (name: string) => {
      const env = { ...process.env, ATS_BASE_URL: h.env.ATS_BASE_URL, ATS_API_KEY: h.env.ATS_TEST_OTHER_KEY, ATS_EXAMPLE_SITE: `${site}/index.html` };
      const child = spawn(process.execPath, ['--import', 'tsx', `examples/${name}.ts`], { cwd: PKG, env });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      const code = await new Promise<number | null>((r) => child.on('close', r));
      assert.equal(code, 0, `${name}:\n${out}`);
      return out;
    };
    // Three chains, each using one browser at a time: with the limit of five, the idle browser
    // kept for the follow-up is never the one reclaimed.
    const [runs, browsers, views] = await Promise.all([
      (async () => ({ run: await exec('run'), files: await exec('files'), followUp: await exec('follow-up') }))(),
      (async () => ({ puppeteer: await exec('puppeteer'), playwright: await exec('playwright') }))(),
      (async () => ({ liveView: await exec('live-view'), profile: await exec('profile') }))(),
    ]);
    assert.match(runs.run, /^event run\.completed$/m);
    assert.match(runs.run, /^completed Fixture home$/m);
    assert.match(runs.files, /^sorted\.txt "bread\\neggs\\nmilk\\n"$/m);
    assert.match(runs.followUp, /^first: Fixture home\nsecond: Fixture home\nsession ses_\w+ latest run is the second: true$/m);
    assert.match(browsers.puppeteer, /^watch it live: http\S+\/browsers\/brw_\w+\?token=/m);
    assert.match(browsers.puppeteer, /^title: Fixture home$/m);
    assert.match(browsers.playwright, /^title: Fixture home$/m);
    assert.match(views.liveView, /^read-only until \S+Z http\S+\/browsers\/brw_/m);
    assert.match(views.profile, /^next browser sees: signed_in=yes$/m);
    assert.match(views.profile, /^profile holds cookies of: \[ '127\.0\.0\.1' \]$/m);
    const other = new AgentTaskService({ apiKey: h.env.ATS_TEST_OTHER_KEY, baseUrl: h.env.ATS_BASE_URL });
    const standalone = (await other.browsers.list({ status: 'active' }).toArray()).filter((b) => b.sessionId === null);
    assert.deepEqual(standalone, [], 'every example stopped its browsers');
  });

  test("when the README is read, then each flow's code block is its example file, word for word", () => {
    const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    for (const file of fs.readdirSync(path.join(PKG, 'examples'))) {
      assert.ok(blocks.includes(fs.readFileSync(path.join(PKG, 'examples', file), 'utf8')), `README shows examples/${file}`);
    }
  });

  test('when the SDK is bundled for the browser, then it has no Node built-in and works in Chromium: agents, an error class, paging and an event stream', async () => {
    const bundle = await esbuild.build({ absWorkingDir: ROOT, entryPoints: [path.join(PKG, 'src/index.ts')], bundle: true, platform: 'browser', format: 'iife', globalName: 'ATS', write: false, metafile: true, logLevel: 'silent' });
    assert.deepEqual(
      Object.keys(bundle.metafile.inputs).filter((i) => !i.startsWith('clients/typescript/src/')),
      [],
      'only the SDK itself is bundled',
    );
    const html = `<!doctype html><meta charset="utf-8"><script>${bundle.outputFiles[0]!.text.replaceAll('</script', '<\\/script')}</script>`;
    const browser = await launchTestChromium();
    try {
      const page = await browser.newPage();
      const pageUrl = `${h.env.ATS_BASE_URL}/sdk-in-a-browser.html`; // the gateway's origin: no CORS in the way
      await page.setRequestInterception(true);
      page.on('request', (req) => void (req.url() === pageUrl ? req.respond({ status: 200, contentType: 'text/html', body: html }) : req.continue()));
      await page.goto(pageUrl);
      const runId = (await client().runs.list({ limit: 1 }).firstPage()).items[0]!.id;
      // A string, not a function: what tsx compiles a function into may name helpers the page lacks.
      const seen = (await page.evaluate(`(async () => {
        const c = new ATS.AgentTaskService({ apiKey: ${JSON.stringify(h.env.ATS_API_KEY)}, baseUrl: location.origin });
        const agents = (await c.agents.list()).map((a) => a.name);
        const notFound = await c.runs.get('run_nope').catch((e) => ({ name: e.name, status: e.status, isClass: e instanceof ATS.NotFoundError }));
        const runs = (await c.runs.list({ limit: 1 }).toArray(2)).length;
        const events = [];
        for await (const e of c.runs.stream(${JSON.stringify(runId)})) events.push(e.type);
        return { agents, notFound, runs, events };
      })()`)) as { agents: string[]; notFound: unknown; runs: number; events: string[] };
      assert.deepEqual(seen.agents, ['browser-agent', 'browsercode']);
      assert.deepEqual(seen.notFound, { name: 'NotFoundError', status: 404, isClass: true });
      assert.equal(seen.runs, 2);
      assert.equal(seen.events[0], 'run.queued');
      assert.match(seen.events.at(-1)!, /^run\.(completed|failed|stopped)$/);
    } finally {
      await browser.close();
    }
  });

  test('when the package is installed from its folder into another project, then a plain Node script imports it and calls the API', async () => {
    assert.ok(fs.existsSync(path.join(PKG, 'dist/index.js')), 'run make build first');
    const dir = tmp();
    await run('npm', ['init', '-y'], { cwd: dir });
    await run('npm', ['install', '--no-audit', '--no-fund', '--offline', PKG], { cwd: dir });
    fs.writeFileSync(
      path.join(dir, 'main.mjs'),
      "import { AgentTaskService, NotFoundError } from '@agent-task-service/client';\n" +
        'const c = new AgentTaskService();\n' +
        "console.log((await c.agents.list()).map((a) => a.name).join(' '));\n" +
        "console.log(await c.runs.get('run_x').catch((e) => e instanceof NotFoundError));\n",
    );
    const { stdout } = await run(process.execPath, ['main.mjs'], { cwd: dir, env: { ...process.env, ATS_BASE_URL: h.env.ATS_BASE_URL, ATS_API_KEY: h.env.ATS_API_KEY } });
    assert.equal(stdout, 'browser-agent browsercode\ntrue\n');
  });
});

describe('the TypeScript SDK types', () => {
  test('when the API document is generated again, then it matches the committed types; a field added to the API and not regenerated makes them differ', async () => {
    const committed = fs.readFileSync(GENERATED_FILE, 'utf8');
    const doc = apiDocument();
    assert.equal(await renderTypes(doc), committed, 'src/generated/openapi.ts is stale: run make clients-generate and commit');
    const changed = structuredClone(doc) as { components: { schemas: Record<string, { properties: Record<string, unknown>; required: string[] }> } };
    const runSchema = changed.components.schemas.Run!;
    runSchema.properties.priority = { type: 'integer' };
    runSchema.required.push('priority');
    const drifted = await renderTypes(changed);
    assert.notEqual(drifted, committed);
    assert.match(drifted, /priority: number;/);
    assert.match(fs.readFileSync(path.join(PKG, 'src/models.ts'), 'utf8'), /export type Run = Schemas\['Run'\];/, 'the SDK reads Run off the generated schema');
  });

  test('when the shipped declarations are read by a strict consumer, then they compile, the public surface has no any, and the examples type-check against them', () => {
    const dist = path.join(PKG, 'dist');
    const examples = fs.readdirSync(path.join(PKG, 'examples')).map((f) => path.join(PKG, 'examples', f));
    assert.deepEqual(findAny(path.join(dist, 'index.d.ts'), dist, examples), { diagnostics: [], anys: [] });
    // The check finds an `any` where there is one.
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'leaky.d.ts'), `import type { Run } from ${JSON.stringify(path.join(dist, 'index.js'))};\nexport declare function f(): Promise<Run & { extra: any }>;\n`);
    assert.deepEqual(findAny(path.join(dir, 'leaky.d.ts'), dir).anys, ['f(value)()→<0>.extra']);
  });
});

describe('the TypeScript SDK parts', () => {
  test('when server-sent events arrive split anywhere (CRLF across chunks, multi-line data, comments), then each event comes out whole', async () => {
    const text = ': keep-alive\r\n\r\nid: 1\r\nevent: step\r\ndata: {"a":\r\ndata: 1}\r\n\r\nid: 2\ndata: two\n\n: bye\n\n';
    const bytes = new TextEncoder().encode(text);
    for (const size of [1, 2, 3, 7, bytes.length]) {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += size) controller.enqueue(bytes.slice(i, i + size));
          controller.close();
        },
      });
      const events = [];
      for await (const e of parseSse(body)) events.push(e);
      assert.deepEqual(
        events,
        [
          { id: '1', event: 'step', data: '{"a":\n1}' },
          { id: '2', event: undefined, data: 'two' },
        ],
        `chunks of ${size}`,
      );
    }
  });

  test('when options are sent, then camelCase keys become the API’s snake_case, nested too, and unset ones are left out', () => {
    assert.deepEqual(toSnake({ task: 't', sessionId: 's', attachedFileIds: ['file_a'], browser: { proxyCountryCode: 'de', screenWidth: 800 }, model: undefined }), {
      task: 't',
      session_id: 's',
      attached_file_ids: ['file_a'],
      browser: { proxy_country_code: 'de', screen_width: 800 },
    });
  });
});
