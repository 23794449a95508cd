/**
 * Webhooks end to end: every service its own process, a receiver the test runs on loopback
 * (allowed by WEBHOOK_ALLOW_LOOPBACK, as `make up` does), builtin runs in real Chromium, and each
 * delivery verified with the `standardwebhooks` library, as an integrator would.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { serveSite, type TestSite } from './support/site.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';
import { startWebhookReceiver, type ReceivedHook, type WebhookReceiver } from './support/webhook-receiver.js';

let f: StackFixture;
let site: TestSite;
const receivers: WebhookReceiver[] = [];
const TIMEOUT_MS = 1500;

before(async () => {
  site = await serveSite();
  f = await startStackFixture({
    projects: ['order', 'retry', 'crash', 'misc', 'guard', 'rec', 'files'],
    env: {
      DEFAULT_MODEL: 'builtin',
      MAX_ACTIVE_BROWSERS_PER_PROJECT: '10',
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      WEBHOOK_RETRY_BASE_MS: '200',
      WEBHOOK_RETRY_MAX_MS: '800',
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_OUTBOX_POLL_MS: '200',
    },
  });
});
after(async () => {
  await f?.stop();
  await Promise.all(receivers.map((r) => r.close()));
  await site?.close();
});

type Project = 'order' | 'retry' | 'crash' | 'misc' | 'guard' | 'rec' | 'files';
const json = (p: Project, method: string, url: string, body?: unknown) =>
  f.api(url, { method, key: f.projects[p]!.key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

interface Created {
  id: string;
  secret: string;
  url: string;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
}

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver();
  receivers.push(r);
  return r;
}

async function createWebhook(p: Project, body: Record<string, unknown>): Promise<Created> {
  const res = await json(p, 'POST', '/api/v1/webhooks', body);
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as Created;
}

async function startRun(p: Project): Promise<string> {
  const res = await json(p, 'POST', '/api/v1/agents/browser-agent/runs', { task: `Open ${site.url('run-table.html')}. Extract the table as JSON.`, model: 'builtin' });
  assert.equal(res.status, 202, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

const body = (h: ReceivedHook) => JSON.parse(h.body) as { id: string; type: string; createdAt: string; data: Record<string, any> };
const RUN_EVENTS = ['run.queued', 'run.started', 'run.completed'];
/** The hooks of one run, in the order they arrived. */
const ofRun = (r: WebhookReceiver, runId: string) => r.received.filter((h) => body(h).data.id === runId);

describe('webhooks', () => {
  test('when a builtin run completes, then the receiver gets run.queued, run.started and run.completed in order, each signed (standardwebhooks verifies it) with the run as GET returns it', async () => {
    const r = await receiver();
    const hook = await createWebhook('order', { url: r.url, event_types: ['run.queued', 'run.started', 'run.completed', 'run.failed'], description: 'ci' });
    assert.match(hook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const read = (await (await json('order', 'GET', `/api/v1/webhooks/${hook.id}`)).json()) as Record<string, unknown>;
    assert.equal(read.secret, undefined, 'the secret is shown once, at creation');
    assert.deepEqual(read.eventTypes, ['run.queued', 'run.started', 'run.completed', 'run.failed']);

    const runId = await startRun('order');
    const completed = await r.seen((h) => body(h).type === 'run.completed' && body(h).data.id === runId);
    const hooks = ofRun(r, runId);
    assert.deepEqual(hooks.map((h) => body(h).type), RUN_EVENTS);
    const wh = new Webhook(hook.secret);
    for (const h of hooks) {
      wh.verify(h.body, h.headers); // throws on a bad signature or timestamp
      assert.equal(h.headers['webhook-id'], body(h).id);
      assert.match(body(h).id, /^evt_/);
    }
    assert.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(completed.body, completed.headers), 'another secret does not verify');
    const run = (await (await json('order', 'GET', `/api/v1/agents/browser-agent/runs/${runId}`)).json()) as Record<string, unknown>;
    assert.deepEqual(body(completed).data, run);
    assert.equal(body(hooks[0]!).data.status, 'queued');
    assert.equal(body(hooks[1]!).data.status, 'running');

    const deliveries = (await (await json('order', 'GET', `/api/v1/webhooks/${hook.id}/deliveries`)).json()) as { items: Record<string, any>[] };
    const done = await until(async () => {
      const d = (await (await json('order', 'GET', `/api/v1/webhooks/${hook.id}/deliveries`)).json()) as { items: Record<string, any>[] };
      return d.items.length === 3 && d.items.every((x) => x.status === 'succeeded') && d.items;
    }, { what: 'three succeeded deliveries' });
    assert.ok(deliveries.items.length >= 1);
    assert.deepEqual(done.map((d) => d.eventType), [...RUN_EVENTS].reverse(), 'newest first');
    for (const d of done) {
      assert.equal(d.lastStatusCode, 200);
      assert.equal(d.attempts, 1);
      assert.equal(d.nextAttemptAt, null);
      assert.ok(d.lastLatencyMs >= 0 && d.deliveredAt);
    }
  });

  test('when the receiver is down for the first attempts, then it gets every event once it is back, still in order, and the deliveries show the failed attempts', async () => {
    const r = await receiver();
    let failures = 4;
    r.reply = () => (failures-- > 0 ? 503 : 200);
    const hook = await createWebhook('retry', { url: r.url, event_types: RUN_EVENTS });
    const runId = await startRun('retry');
    await until(() => ofRun(r, runId).some((h) => body(h).type === 'run.completed'), { what: 'run.completed', timeoutMs: 30000 });
    const types = ofRun(r, runId).map((h) => body(h).type);
    // Each event is retried until accepted before the next of the run goes: the order never goes back.
    const rank = types.map((t) => RUN_EVENTS.indexOf(t));
    assert.deepEqual([...rank].sort((a, b) => a - b), rank, `arrival order ${types.join(', ')}`);
    assert.deepEqual([...new Set(types)], RUN_EVENTS);
    const { items } = (await (await json('retry', 'GET', `/api/v1/webhooks/${hook.id}/deliveries`)).json()) as { items: Record<string, any>[] };
    const queued = items.find((d) => d.eventType === 'run.queued')!;
    assert.equal(queued.status, 'succeeded');
    assert.equal(queued.attempts, 5);
    assert.equal(queued.lastStatusCode, 200);
    assert.equal(queued.lastError, null);
  });

  test('when the dispatcher is killed with kill -9 mid-delivery, then nothing is lost: the run is not held up, and every event arrives after it restarts', async () => {
    const r = await receiver();
    let release!: (status: number) => void;
    const held = new Promise<number>((resolve) => (release = resolve));
    let first = true;
    r.reply = () => (first ? ((first = false), held) : 200);
    const hook = await createWebhook('crash', { url: r.url, event_types: RUN_EVENTS });
    const runId = await startRun('crash');
    await r.seen((h) => body(h).data.id === runId);
    await f.stack.kill('webhooks'); // SIGKILL while the receiver holds the first delivery
    release(200);
    // A receiver that does not answer, and a dispatcher that is gone, do not delay the run.
    const status = await until(async () => {
      const run = (await (await json('crash', 'GET', `/api/v1/agents/browser-agent/runs/${runId}`)).json()) as { status: string };
      return run.status === 'completed' && run.status;
    }, { what: 'the run completed while the webhooks service was down', timeoutMs: 30000 });
    assert.equal(status, 'completed');
    await f.stack.startService('webhooks');
    await until(() => ofRun(r, runId).some((h) => body(h).type === 'run.completed'), { what: 'run.completed after the restart', timeoutMs: 30000 });
    const hooks = ofRun(r, runId);
    assert.deepEqual([...new Set(hooks.map((h) => body(h).type))], RUN_EVENTS);
    // The delivery cut by the crash came again, with the same id (receivers drop repeats by it).
    assert.equal(hooks[0]!.headers['webhook-id'], hooks[1]!.headers['webhook-id']);
    for (const h of hooks) new Webhook(hook.secret).verify(h.body, h.headers);
  });

  test('when a test ping is sent, redelivered, and sent again after a rotation, then each arrives signed, with both secrets during the overlap; a 410 disables the endpoint with a note', async () => {
    const r = await receiver();
    const hook = await createWebhook('misc', { url: r.url, event_types: ['file.created'] });
    const first = r.next(); // listening before the ping: it may arrive before the reply does
    const ping = await json('misc', 'POST', `/api/v1/webhooks/${hook.id}/test`);
    assert.equal(ping.status, 202);
    const delivery = (await ping.json()) as { id: string; status: string; eventType: string };
    assert.equal(delivery.eventType, 'webhook.test');
    const got = await first;
    new Webhook(hook.secret).verify(got.body, got.headers);
    assert.deepEqual(body(got).data, { webhookId: hook.id, message: 'A test event from the Agent Task Service' });

    const again = r.next();
    const redo = await json('misc', 'POST', `/api/v1/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`);
    assert.equal(redo.status, 202);
    assert.equal((await again).headers['webhook-id'], got.headers['webhook-id']);

    const rotated = await json('misc', 'POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { overlap_seconds: 600 });
    assert.equal(rotated.status, 200);
    const { secret, previousSecretExpiresAt } = (await rotated.json()) as { secret: string; previousSecretExpiresAt: string };
    assert.notEqual(secret, hook.secret);
    assert.ok(Date.parse(previousSecretExpiresAt) > Date.now());
    const third = r.next();
    await json('misc', 'POST', `/api/v1/webhooks/${hook.id}/test`);
    const signed = await third;
    assert.equal(signed.headers['webhook-signature']!.split(' ').length, 2);
    new Webhook(secret).verify(signed.body, signed.headers);
    new Webhook(hook.secret).verify(signed.body, signed.headers);

    r.reply = () => 410;
    await json('misc', 'POST', `/api/v1/webhooks/${hook.id}/test`);
    const disabled = await until(async () => {
      const w = (await (await json('misc', 'GET', `/api/v1/webhooks/${hook.id}`)).json()) as Created;
      return !w.enabled && w;
    }, { what: 'the endpoint disabled' });
    assert.match(disabled.disabledReason ?? '', /410 Gone/);
    const enabled = await json('misc', 'PATCH', `/api/v1/webhooks/${hook.id}`, { enabled: true });
    assert.equal(((await enabled.json()) as Created).disabledReason, null);
  });

  test('when a browser is created and stopped, then a browser.* endpoint gets browser.created then browser.stopped with the browser as GET returns it, without its ways in', async () => {
    const r = await receiver();
    const hook = await createWebhook('misc', { url: r.url, event_types: ['browser.created', 'browser.stopped'] });
    const stopped = r.next((h) => body(h).type === 'browser.stopped'); // listening before: it may arrive before the reply does
    const created = await json('misc', 'POST', '/api/v1/browsers', {});
    assert.equal(created.status, 201, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    assert.equal((await json('misc', 'POST', `/api/v1/browsers/${id}/stop`)).status, 200);
    assert.equal(body(await stopped).data.id, id);
    const hooks = r.received.filter((h) => body(h).data.id === id);
    assert.deepEqual(hooks.map((h) => body(h).type), ['browser.created', 'browser.stopped']);
    for (const h of hooks) new Webhook(hook.secret).verify(h.body, h.headers);
    const read = (await (await json('misc', 'GET', `/api/v1/browsers/${id}`)).json()) as Record<string, unknown>;
    // A CDP token or live view link does not leave the service in an event.
    assert.deepEqual(body(hooks[1]!).data, { ...read, cdpUrl: null, liveViewUrl: null, recordingUrl: null });
    assert.equal(body(hooks[0]!).data.status, 'active');
  });

  test('when a browser stops, then a recording.ready endpoint gets the browser as GET returns it once its recording can be fetched, with a recordingUrl that downloads the MP4, signed', { timeout: 90_000 }, async () => {
    const r = await receiver();
    const hook = await createWebhook('rec', { url: r.url, event_types: ['recording.ready'] });
    const created = await json('rec', 'POST', '/api/v1/browsers', {});
    assert.equal(created.status, 201, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    const ready = r.seen((h) => body(h).data.id === id);
    assert.equal((await json('rec', 'POST', `/api/v1/browsers/${id}/stop`)).status, 200);
    const got = await ready;
    new Webhook(hook.secret).verify(got.body, got.headers);
    const event = body(got);
    assert.equal(event.type, 'recording.ready');
    assert.equal(got.headers['webhook-id'], event.id);
    // Sent only once the recording is there: the API already hands it out.
    const recording = await json('rec', 'GET', `/api/v1/browsers/${id}/recording`);
    assert.equal(recording.status, 200, await recording.clone().text());
    const read = (await (await json('rec', 'GET', `/api/v1/browsers/${id}`)).json()) as Record<string, unknown>;
    assert.equal(read.status, 'stopped');
    // The link is fresh on every read (its signature differs); the rest is the browser as GET returns it, without its ways in.
    assert.deepEqual({ ...event.data, recordingUrl: read.recordingUrl }, { ...read, cdpUrl: null, liveViewUrl: null });
    const video = await fetch(event.data.recordingUrl as string);
    assert.equal(video.status, 200);
    const mp4 = Buffer.from(await video.arrayBuffer());
    assert.equal(mp4.subarray(4, 8).toString('latin1'), 'ftyp', 'the link serves an MP4');
    const others = r.received.filter((h) => body(h).data.id === id);
    assert.deepEqual(others.map((h) => body(h).type), ['recording.ready'], 'once, and only the type subscribed to');
  });

  test("when a run saves an output file, then a file.created endpoint gets it as the run's file list returns it, signed, and its downloadUrl serves the file", { timeout: 90_000 }, async () => {
    const r = await receiver();
    const hook = await createWebhook('files', { url: r.url, event_types: ['file.created'] });
    const started = await json('files', 'POST', '/api/v1/agents/browsercode/runs', { task: "Write 'Lamp 25' to prices.txt", model: 'builtin' });
    assert.equal(started.status, 202, await started.clone().text());
    const runId = ((await started.json()) as { id: string }).id;
    const got = await r.seen((h) => body(h).data.name === 'prices.txt');
    new Webhook(hook.secret).verify(got.body, got.headers);
    const event = body(got);
    assert.equal(event.type, 'file.created');
    const listed = (await (await json('files', 'GET', `/api/v1/agents/browsercode/runs/${runId}/files?kind=output`)).json()) as { items: Record<string, unknown>[] };
    const item = listed.items.find((i) => i.id === event.data.id);
    assert.ok(item, `the event's file ${event.data.id} is among the run's outputs: ${JSON.stringify(listed.items)}`);
    // Its download link is signed afresh on every read; the rest is the REST item.
    assert.deepEqual({ ...event.data, downloadUrl: item.downloadUrl }, item);
    assert.equal(event.data.kind, 'output');
    const file = await fetch(event.data.downloadUrl as string);
    assert.equal(file.status, 200);
    const saved = await file.text();
    assert.equal(saved.trim(), 'Lamp 25');
    assert.equal(Buffer.byteLength(saved), event.data.sizeBytes);
    assert.deepEqual(r.received.map((h) => body(h).type), ['file.created'], 'one event, of the type subscribed to');
  });

  test('when a webhook URL names a private, link-local or metadata address, a service port or no http(s), then it is refused and nothing is created', async () => {
    const refused = ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.7/hook', 'http://[fd00::1]/hook', 'http://0.0.0.0:9/', `http://127.0.0.1:${f.stack.gatewayPort}/api`, 'ftp://example.com/hook', 'http://user:pw@example.com/'];
    for (const url of refused) {
      const res = await json('guard', 'POST', '/api/v1/webhooks', { url });
      assert.equal(res.status, 400, `${url}: ${await res.clone().text()}`);
      assert.match(((await res.json()) as { detail: string }).detail, /url/);
    }
    const bad = await json('guard', 'POST', '/api/v1/webhooks', { url: 'https://example.com/hook', event_types: ['run.exploded'] });
    assert.equal(bad.status, 422);
    const list = (await (await json('guard', 'GET', '/api/v1/webhooks')).json()) as { items: unknown[] };
    assert.deepEqual(list.items, []);
    const other = await json('order', 'GET', '/api/v1/webhooks');
    assert.ok(((await other.json()) as { items: unknown[] }).items.length > 0);
    const foreign = (await (await json('order', 'GET', '/api/v1/webhooks')).json()) as { items: { id: string }[] };
    assert.equal((await json('guard', 'GET', `/api/v1/webhooks/${foreign.items[0]!.id}`)).status, 404, "another project's webhook is not found");
  });
});
