/** The gateway's edge through real HTTP, with every service a real process behind real gRPC. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { processExists, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

let f: StackFixture;
before(async () => {
  // A PGlite per service (the older layout a data directory may have): the one file whose stack keeps
  // that path running, beside the services' own tests on it; the other files use the embedded database.
  f = await startStackFixture({ embeddedDatabase: 'per-service' });
});
after(async () => {
  const pids = f.stack.pids();
  await f.stop();
  assert.deepEqual(pids.filter(processExists), [], 'no process of the stack survives its stop');
});

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  f.api(path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

describe('auth', () => {
  test('when the key is valid, then GET /agents lists both agents with their watch verbs', async () => {
    const res = await f.api('/api/v1/agents');
    assert.equal(res.status, 200);
    const body = (await res.json()) as { agents: { name: string; watch: string; session: { kind: string }; capabilities: string[] }[] };
    assert.deepEqual(body.agents.map((a) => [a.name, a.watch, a.session.kind]), [
      ['browser-agent', 'steps', 'disposable'],
      ['browsercode', 'events', 'durable'],
    ]);
    assert.deepEqual(body.agents[1]!.capabilities, ['browser', 'code', 'terminal', 'files']);
  });

  test('when the key is missing or wrong, then 401 with the documented detail', async () => {
    for (const key of [null, 'ats_wrong_key_0123456789']) {
      const res = await f.api('/api/v1/agents', { key });
      assert.equal(res.status, 401);
      assert.deepEqual(await res.json(), { detail: 'Invalid or missing API key' });
    }
  });
});

describe('validation (422, FastAPI-style)', () => {
  const runs = '/api/v1/agents/browser-agent/runs';

  test('when a run has a top-level browser_profile_id or structured_output, then 422 Extra inputs are not permitted', async () => {
    for (const field of ['browser_profile_id', 'structured_output']) {
      const res = await post(runs, JSON.stringify({ task: 'hi', [field]: 'x' }));
      assert.equal(res.status, 422);
      assert.deepEqual(await res.json(), { detail: [{ type: 'extra_forbidden', loc: ['body', field], msg: 'Extra inputs are not permitted', input: 'x' }] });
    }
  });

  test('when a field has the wrong type, then 422 names its location and type', async () => {
    const res = await post(runs, JSON.stringify({ task: 42 }));
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), { detail: [{ type: 'string_type', loc: ['body', 'task'], msg: 'Input should be a valid string', input: 42 }] });
  });

  test('when a required field is missing, then 422 Field required', async () => {
    const res = await post(runs, JSON.stringify({ model: 'builtin' }));
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), { detail: [{ type: 'missing', loc: ['body', 'task'], msg: 'Field required', input: { model: 'builtin' } }] });
  });

  test('when the JSON is broken, then 422 json_invalid', async () => {
    const res = await post(runs, '{"task": "hi",');
    assert.equal(res.status, 422);
    const body = (await res.json()) as { detail: { type: string; loc: unknown[]; msg: string }[] };
    assert.equal(body.detail[0]!.type, 'json_invalid');
    assert.equal(body.detail[0]!.msg, 'JSON decode error');
    assert.equal(body.detail[0]!.loc[0], 'body');
  });

  test('when the body is over the cap, then 413 with a detail', async () => {
    const res = await post(runs, JSON.stringify({ task: 'x'.repeat(2 * 1024 * 1024) }));
    assert.equal(res.status, 413);
    assert.match(((await res.json()) as { detail: string }).detail, /too large/);
  });

  test('when the body is not JSON, then 415', async () => {
    const res = await post(runs, 'task=hi', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(res.status, 415);
  });

  test('when a string field or a query holds a NUL, then 422 names where, and nothing is created', async () => {
    const before = ((await (await f.api('/api/v1/browser-profiles')).json()) as { items: unknown[] }).items.length;
    const res = await post('/api/v1/browser-profiles', JSON.stringify({ name: 'a\u0000b' }));
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), { detail: [{ type: 'string_pattern_mismatch', loc: ['body', 'name'], msg: 'String should not contain NUL characters', input: 'a\u0000b' }] });
    assert.equal(((await (await f.api('/api/v1/browser-profiles')).json()) as { items: unknown[] }).items.length, before);
    const q = await f.api('/api/v1/agents/browser-agent/runs?session_id=ses_%00');
    assert.equal(q.status, 422);
    assert.deepEqual(((await q.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['query', 'session_id']);
  });

  test('when a list cursor is malformed or names nothing, then 422 at the cursor; a nextCursor pages on', async () => {
    for (const name of ['one', 'two']) assert.equal((await post('/api/v1/browser-profiles', JSON.stringify({ name }))).status, 201);
    const first = (await (await f.api('/api/v1/browser-profiles?limit=1')).json()) as { items: { id: string }[]; nextCursor: string };
    const second = (await (await f.api(`/api/v1/browser-profiles?limit=1&cursor=${first.nextCursor}`)).json()) as { items: { id: string }[] };
    assert.notEqual(second.items[0]!.id, first.items[0]!.id);
    const ws = (await (await post('/api/v1/agent-workspaces', JSON.stringify({ name: 'paged' }))).json()) as { id: string };
    for (const path of ['/api/v1/browser-profiles?cursor=prf_nothing', '/api/v1/browsers?cursor=junk', '/api/v1/agent-workspaces?cursor=junk', `/api/v1/agent-workspaces/${ws.id}/files?cursor=a.txt`, '/api/v1/agents/browser-agent/runs?cursor=junk', '/api/v1/agents/browsercode/sessions?cursor=not-a-date%7Cses_1']) {
      const res = await f.api(path);
      assert.equal(res.status, 422, path);
      const [issue] = ((await res.json()) as { detail: { type: string; loc: unknown[]; msg: string }[] }).detail;
      assert.deepEqual([issue!.type, issue!.loc, issue!.msg], ['value_error', ['query', 'cursor'], 'Value error, Invalid cursor: pass the nextCursor of the previous page'], path);
    }
  });

  test('when a body nests deeper than any request does, then 422 without echoing it', async () => {
    const res = await post(runs, `{"task":${'['.repeat(10000)}${']'.repeat(10000)}}`);
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), { detail: [{ type: 'value_error', loc: ['body'], msg: 'Value error, nested deeper than 32 levels', input: null }] });
  });

  test('when a body says it is gzip but is not, then 400 with a detail', async () => {
    const res = await post(runs, JSON.stringify({ task: 'hi' }), { 'content-encoding': 'gzip' });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { detail: string }).detail, /^Request body could not be read/);
  });
});

describe('errors and routing', () => {
  test('when the agent in the path is unknown, then 404 Agent not found', async () => {
    const res = await post('/api/v1/agents/nope/runs', JSON.stringify({ task: 'hi' }));
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { detail: 'Agent not found' });
  });

  test('when a path id has a NUL or is not valid percent-encoding, then 404 with the documented shape', async () => {
    for (const [path, detail] of [
      ['/api/v1/browsers/brw_%00', 'Browser not found'],
      ['/api/v1/agents/browser-agent/runs/a%00b/steps', 'Run not found'],
      ['/api/v1/browser-profiles/%00', 'Profile not found'],
      ['/api/v1/browsers/%E0%A4%A', 'Not Found'],
      ['/api/v1/agents/%C0%AF/runs', 'Not Found'],
      ['/api/v1/agent-workspaces/%ED%A0%80', 'Not Found'],
    ] as const) {
      const res = await f.api(path);
      assert.equal(res.status, 404, path);
      assert.deepEqual(await res.json(), { detail }, path);
    }
  });

  test('when a request line is too long for the server, then 431 with a JSON detail', async () => {
    const res = await f.api(`/api/v1/agents?${'x'.repeat(20000)}`);
    assert.equal(res.status, 431);
    assert.deepEqual(await res.json(), { detail: 'Request header fields or URL too large' });
  });

  test('when a client sends X-Request-Id, then it is echoed; otherwise one is made', async () => {
    const given = await f.api('/api/v1/agents', { headers: { 'x-request-id': 'req-123' } });
    assert.equal(given.headers.get('x-request-id'), 'req-123');
    const made = await f.api('/api/v1/agents');
    assert.match(made.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  test('when /openapi.json is read, then it is OpenAPI 3.1 and documents the run routes', async () => {
    const res = await fetch(`${f.stack.baseUrl}/openapi.json`);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    assert.equal(doc.openapi, '3.1.0');
    assert.ok(doc.paths['/api/v1/agents/{agent}/runs']);
  });
});

describe('health and failure of a service', () => {
  test('when every service runs, then /healthz reports each SERVING', async () => {
    const res = await fetch(`${f.stack.baseUrl}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      status: 'ok',
      services: { run: 'SERVING', 'browser-pool': 'SERVING', 'file-storage': 'SERVING', 'live-view': 'SERVING', webhooks: 'SERVING', nats: 'SERVING' },
    });
  });

  test('when the run service is killed, then /healthz says so and its routes answer 503 at once; a restart recovers', async () => {
    await f.stack.kill('run');

    const health = await fetch(`${f.stack.baseUrl}/healthz`);
    assert.equal(health.status, 503);
    const report = (await health.json()) as { status: string; services: Record<string, string> };
    assert.equal(report.status, 'degraded');
    assert.equal(report.services.run, 'UNREACHABLE');
    assert.equal(report.services['file-storage'], 'SERVING');

    const started = Date.now();
    const res = await f.api('/api/v1/agents');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { detail: 'Service unavailable, try again shortly' });
    assert.ok(Date.now() - started < 4000, 'the gateway answers before its 5 s deadline, it does not hang');

    // Routes of other services are unaffected.
    const other = await post('/api/v1/agent-workspaces', JSON.stringify({ name: 'w' }));
    assert.equal(other.status, 201);

    await f.stack.startService('run');
    await until(async () => (await f.api('/api/v1/agents')).status === 200, { timeoutMs: 10000, intervalMs: 100, what: `the run service back\n${f.logs('run')}` });
    assert.equal((await fetch(`${f.stack.baseUrl}/healthz`)).status, 200);
  });
});
