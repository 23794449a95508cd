/**
 * Idempotency keys, API keys through the API, CORS and rate limits: the gateway app in-process
 * over real HTTP on the gateway's real database (PGlite, and Postgres when one runs), with stub
 * services that count what they were asked to create.
 */
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Writable } from 'node:stream';
import { openDatabase, type Database } from '../../services/common/src/db.js';
import { RemoteError, Status } from '../../services/common/src/errors.js';
import { createLogger } from '../../services/common/src/logger.js';
import { drivers, tempDir, testSchema } from '../../test/support/infra.js';
import { ApiKeyRepository, migrations } from './api-key.repository.js';
import { createApp, type GatewayDeps } from './app.js';
import { ApiKeyAuthenticator } from './auth.js';
import type { Clients } from './clients.js';
import { Idempotency } from './idempotency.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { RateLimiter, type RateLimits } from './rate-limit.js';
import { RateLimitRepository } from './rate-limit.repository.js';

const ORIGIN = 'https://app.example.com';

/** Services that create runs and workspaces with fresh ids, count the creates, and can hold a create until released. */
class StubServices {
  runCreates = 0;
  workspaceCreates = 0;
  /** While set, a run create waits for it. */
  hold: Promise<void> | undefined;
  /** Failures the next workspace creates raise (one each). */
  workspaceFailures: Error[] = [];
  readonly entered = new EventEmitter();

  clients(): Clients {
    return {
      run: {
        api: {
          createRun: async () => {
            const n = ++this.runCreates;
            this.entered.emit('createRun');
            await this.hold;
            return { run: { id: `run_${n}`, sessionId: `ses_${n}`, workspaceId: '', missingFileIds: [] } };
          },
        },
      },
      fileStorage: {
        api: {
          createWorkspace: async (req: { name: string }) => {
            const failure = this.workspaceFailures.shift();
            if (failure) throw failure;
            const n = ++this.workspaceCreates;
            return { workspace: { id: `wsp_${n}`, name: req.name, createdAt: new Date().toISOString(), updatedAt: new Date().toISOString() } };
          },
        },
      },
      browserPool: { api: {} },
      liveView: { api: {} },
    } as unknown as Clients;
  }
}

for (const driver of await drivers()) {
  describe(`idempotency, API keys, CORS and rate limits on ${driver.name}`, () => {
    let db: Database;
    let dataDir: string;
    const servers: http.Server[] = [];
    const stubs = new StubServices();
    let repo: ApiKeyRepository;
    let key = '';
    let otherProjectKey = '';

    /** A gateway on the shared database (as another replica, or the same one after a restart, would be). */
    async function gateway(opts: { rateLimits?: RateLimits; waitMs?: number; corsOrigins?: string[]; retentionSeconds?: number } = {}): Promise<string> {
      const logger = createLogger('gateway', 'warn', new Writable({ write: (_c, _e, done) => done() }));
      const deps: GatewayDeps = {
        logger,
        clients: stubs.clients(),
        auth: new ApiKeyAuthenticator(new ApiKeyRepository(db.knex)),
        bodyLimitBytes: 1 << 20,
        idempotency: new Idempotency(new IdempotencyRepository(db.knex, { retentionSeconds: opts.retentionSeconds ?? 86400, lockSeconds: 60 }), { waitMs: opts.waitMs ?? 5000 }),
        ...(opts.rateLimits ? { rateLimiter: new RateLimiter(new RateLimitRepository(db.knex), opts.rateLimits) } : {}),
        ...(opts.corsOrigins ? { corsOrigins: opts.corsOrigins } : {}),
      };
      const server = http.createServer(createApp(deps));
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    }

    let base = '';
    before(async () => {
      dataDir = tempDir('integrations');
      db = await openDatabase({ service: 'gateway', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      repo = new ApiKeyRepository(db.knex);
      key = (await repo.create('alpha', 'test')).key;
      otherProjectKey = (await repo.create('beta', 'test')).key;
      base = await gateway();
    });
    after(async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const post = (url: string, body: unknown, headers: Record<string, string> = {}, k = key) =>
      fetch(url, { method: 'POST', headers: { 'x-service-api-key': k, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const createRun = (idem: string, body: unknown = { task: 'Find the price' }, at = base, k = key) =>
      post(`${at}/api/v1/agents/browser-agent/runs`, body, { 'idempotency-key': idem }, k);

    describe('Idempotency-Key', () => {
      test('when a create is retried with the same key and body, then the first run comes back (marked replayed) and no second run is made', async () => {
        const before = stubs.runCreates;
        const first = await createRun('retry-1');
        const retry = await createRun('retry-1', { task: 'Find the price' });

        assert.equal(first.status, 202);
        assert.equal(retry.status, 202);
        const a = (await first.json()) as { id: string };
        assert.deepEqual(await retry.json(), a);
        assert.equal(first.headers.get('idempotent-replayed'), null);
        assert.equal(retry.headers.get('idempotent-replayed'), 'true');
        assert.equal(stubs.runCreates - before, 1, 'the run service was asked once');
      });

      test('when the connection of a create is cut before the answer, then a retry with the same key gets the run the first request made', async () => {
        const before = stubs.runCreates;
        let release!: () => void;
        stubs.hold = new Promise<void>((r) => (release = r));
        const entered = once(stubs.entered, 'createRun');
        const u = new URL(`${base}/api/v1/agents/browser-agent/runs`);
        const body = JSON.stringify({ task: 'Book a table' });
        const cut = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'x-service-api-key': key, 'content-type': 'application/json', 'idempotency-key': 'cut-1', 'content-length': Buffer.byteLength(body) } });
        cut.on('error', () => undefined); // the cut we make
        cut.end(body);
        await entered; // the first request is creating its run
        cut.destroy();

        const retry = createRun('cut-1', { task: 'Book a table' });
        release();
        stubs.hold = undefined;
        const res = await retry;

        assert.equal(res.status, 202);
        assert.equal(((await res.json()) as { id: string }).id, `run_${before + 1}`, 'the run of the cut request');
        assert.equal(stubs.runCreates - before, 1);
      });

      test('when two calls with one key arrive in parallel, then one run is made and both get its id', async () => {
        const before = stubs.runCreates;
        const [a, b] = await Promise.all([createRun('parallel-1'), createRun('parallel-1')]);

        assert.equal(a.status, 202);
        assert.equal(b.status, 202);
        assert.equal(((await a.json()) as { id: string }).id, ((await b.json()) as { id: string }).id);
        assert.equal(stubs.runCreates - before, 1);
      });

      test('when the same key comes with another body, then 422 naming the key and nothing is created', async () => {
        assert.equal((await createRun('body-1', { task: 'One thing' })).status, 202);
        const before = stubs.runCreates;

        const res = await createRun('body-1', { task: 'Another thing' });

        assert.equal(res.status, 422);
        assert.match(((await res.json()) as { detail: string }).detail, /Idempotency-Key was already used for another request/);
        assert.equal(stubs.runCreates, before);
      });

      test('when a retry arrives while the first request still works past the wait, then 409 with Retry-After and a clear detail', async () => {
        const impatient = await gateway({ waitMs: 100 });
        let release!: () => void;
        stubs.hold = new Promise<void>((r) => (release = r));
        const entered = once(stubs.entered, 'createRun');
        const first = createRun('slow-1', undefined, impatient);
        await entered;

        const retry = await createRun('slow-1', undefined, impatient);
        release();
        stubs.hold = undefined;

        assert.equal(retry.status, 409);
        assert.equal(retry.headers.get('retry-after'), '1');
        assert.match(((await retry.json()) as { detail: string }).detail, /still in progress/);
        assert.equal((await first).status, 202);
      });

      test('when the gateway is replaced by another on the same database (a restart, a replica), then a retry is still answered from the first response', async () => {
        const first = (await (await createRun('restart-1')).json()) as { id: string };
        const before = stubs.runCreates;
        const other = await gateway();

        const retry = await createRun('restart-1', undefined, other);

        assert.equal(retry.status, 202);
        assert.equal(((await retry.json()) as { id: string }).id, first.id);
        assert.equal(stubs.runCreates, before);
      });

      test('when two projects use the same key, then each gets its own run', async () => {
        const before = stubs.runCreates;
        const a = (await (await createRun('shared-name')).json()) as { id: string };
        const b = (await (await createRun('shared-name', undefined, base, otherProjectKey)).json()) as { id: string };

        assert.notEqual(a.id, b.id);
        assert.equal(stubs.runCreates - before, 2);
      });

      test('when the first request failed for a passing reason (503), then a retry with the key does the work; a 4xx answer is replayed as it was', async () => {
        stubs.workspaceFailures.push(new RemoteError(Status.UNAVAILABLE, 'down', undefined));
        const url = `${base}/api/v1/agent-workspaces`;
        const failed = await post(url, { name: 'w' }, { 'idempotency-key': 'ws-1' });
        const retried = await post(url, { name: 'w' }, { 'idempotency-key': 'ws-1' });
        stubs.workspaceFailures.push(new RemoteError(Status.NOT_FOUND, 'gone', 'Project not found'));
        const notFound = await post(url, { name: 'x' }, { 'idempotency-key': 'ws-2' });
        const before = stubs.workspaceCreates;
        const notFoundAgain = await post(url, { name: 'x' }, { 'idempotency-key': 'ws-2' });

        assert.equal(failed.status, 503);
        assert.equal(retried.status, 201);
        assert.equal(((await retried.json()) as { name: string }).name, 'w');
        assert.equal(notFound.status, 404);
        assert.equal(notFoundAgain.status, 404);
        assert.equal(notFoundAgain.headers.get('idempotent-replayed'), 'true');
        assert.deepEqual(await notFoundAgain.json(), { detail: 'Project not found' });
        assert.equal(stubs.workspaceCreates, before, 'the replayed 404 asked nothing');
      });

      test('when a key is older than the retention, then a request with it does the work again', async () => {
        await createRun('old-1');
        const before = stubs.runCreates;
        await db.knex('idempotency_keys').where({ idem_key: 'old-1' }).update({ created_at: db.knex.raw(`now() - interval '25 hours'`) });

        const res = await createRun('old-1', { task: 'A new task' });

        assert.equal(res.status, 202);
        assert.equal(stubs.runCreates - before, 1);
      });

      test('when the key is malformed or the body invalid, then 400 or 422 and the key stays free for a correct request', async () => {
        const bad = await createRun('x'.repeat(256));
        const invalid = await createRun('fix-1', { task: '' });
        const fixed = await createRun('fix-1', { task: 'Now valid' });

        assert.equal(bad.status, 400);
        assert.match(((await bad.json()) as { detail: string }).detail, /Idempotency-Key must be 1 to 255 printable ASCII characters/);
        assert.equal(invalid.status, 422);
        assert.equal(fixed.status, 202);
      });
    });

    describe('API keys through the API', () => {
      const api = (path: string, k: string, init: RequestInit = {}) => fetch(`${base}/api/v1${path}`, { ...init, headers: { 'x-service-api-key': k, 'content-type': 'application/json', ...init.headers } });

      test('when a key is issued, then it is shown once, listed by name, prefix, scope and times, works, and after revocation fails at once', async () => {
        const created = await api('/api-keys', key, { method: 'POST', body: JSON.stringify({ name: 'ci' }) });
        assert.equal(created.status, 201);
        const c = (await created.json()) as { id: string; key: string; prefix: string; scope: string; lastUsedAt: string | null };
        assert.match(c.key, /^ats_[0-9A-Za-z]{32}$/);
        assert.equal(c.prefix, c.key.slice(0, 12));
        assert.equal(c.scope, 'full');
        assert.equal(c.lastUsedAt, null);

        assert.equal((await api('/api-keys', c.key)).status, 200, 'the new key works');
        const listed = (await (await api('/api-keys', key)).json()) as { items: Record<string, unknown>[] };
        const item = listed.items.find((k) => k.id === c.id)!;
        assert.deepEqual(Object.keys(item).sort(), ['createdAt', 'id', 'lastUsedAt', 'name', 'prefix', 'scope']);
        assert.equal(item.name, 'ci');
        assert.ok(item.lastUsedAt, 'its use is recorded');
        assert.ok(!JSON.stringify(listed).includes(c.key), 'the key itself is never listed');

        assert.equal((await api(`/api-keys/${c.id}`, key, { method: 'DELETE' })).status, 204);
        const after = await api('/api-keys', c.key);
        assert.equal(after.status, 401);
        assert.ok(!((await (await api('/api-keys', key)).json()) as { items: { id: string }[] }).items.some((k) => k.id === c.id));
        assert.equal((await api(`/api-keys/${c.id}`, key, { method: 'DELETE' })).status, 404, 'revoked once');
      });

      test("when a key of another project names a key, then 404 and the key keeps working", async () => {
        const c = (await (await api('/api-keys', key, { method: 'POST', body: JSON.stringify({ name: 'mine' }) })).json()) as { id: string; key: string };

        const res = await api(`/api-keys/${c.id}`, otherProjectKey, { method: 'DELETE' });

        assert.equal(res.status, 404);
        assert.deepEqual(await res.json(), { detail: 'API key not found' });
        assert.equal((await api('/api-keys', c.key)).status, 200);
      });

      test('when a read key is used, then it reads but every change is a 403 that reaches no service', async () => {
        const read = (await (await api('/api-keys', key, { method: 'POST', body: JSON.stringify({ name: 'dashboard', scope: 'read' }) })).json()) as { id: string; key: string; scope: string };
        assert.equal(read.scope, 'read');
        const before = stubs.runCreates;

        const list = await api('/api-keys', read.key);
        const create = await createRun('read-1', undefined, base, read.key);
        const issue = await api('/api-keys', read.key, { method: 'POST', body: JSON.stringify({ name: 'escalate' }) });
        const revoke = await api(`/api-keys/${read.id}`, read.key, { method: 'DELETE' });

        assert.equal(list.status, 200);
        for (const res of [create, issue, revoke]) {
          assert.equal(res.status, 403);
          assert.match(((await res.json()) as { detail: string }).detail, /read scope/);
        }
        assert.equal(stubs.runCreates, before);
      });

      test('when a key is issued with an unknown scope, then 422 at scope and no key is made', async () => {
        const before = (await repo.list()).length;
        const res = await api('/api-keys', key, { method: 'POST', body: JSON.stringify({ name: 'x', scope: 'admin' }) });

        assert.equal(res.status, 422);
        assert.deepEqual(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['body', 'scope']);
        assert.equal((await repo.list()).length, before);
      });
    });

    describe('CORS', () => {
      const preflight = (at: string, origin: string) =>
        fetch(`${at}/api/v1/agents/browser-agent/runs`, {
          method: 'OPTIONS',
          headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-service-api-key, content-type, idempotency-key' },
        });

      test('when a page of an allowed origin asks, then the preflight allows the key header and the call carries Allow-Origin, never credentials', async () => {
        const at = await gateway({ corsOrigins: [ORIGIN] });

        const pre = await preflight(at, ORIGIN);
        const call = await fetch(`${at}/api/v1/api-keys`, { headers: { origin: ORIGIN, 'x-service-api-key': key } });

        assert.equal(pre.status, 204);
        assert.equal(pre.headers.get('access-control-allow-origin'), ORIGIN);
        assert.match(pre.headers.get('access-control-allow-headers') ?? '', /x-service-api-key/);
        assert.match(pre.headers.get('access-control-allow-headers') ?? '', /idempotency-key/);
        assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/);
        assert.equal(pre.headers.get('access-control-allow-credentials'), null);
        assert.equal(call.status, 200);
        assert.equal(call.headers.get('access-control-allow-origin'), ORIGIN);
        assert.match(call.headers.get('access-control-expose-headers') ?? '', /retry-after/);
        assert.equal(call.headers.get('access-control-allow-credentials'), null);
      });

      test('when a page of another origin asks, or no origin is allowed (the default), then the preflight is refused without Allow-Origin', async () => {
        const at = await gateway({ corsOrigins: [ORIGIN] });

        for (const res of [await preflight(at, 'https://evil.example.net'), await preflight(base, ORIGIN)]) {
          assert.equal(res.status, 403);
          assert.equal(res.headers.get('access-control-allow-origin'), null);
          assert.match(((await res.json()) as { detail: string }).detail, /not allowed/);
        }
        const call = await fetch(`${at}/api/v1/api-keys`, { headers: { origin: 'https://evil.example.net', 'x-service-api-key': key } });
        assert.equal(call.headers.get('access-control-allow-origin'), null);
      });
    });

    describe('rate limits', () => {
      const issue = async () => (await repo.create('alpha', 'limited')).key;

      test('when a key bursts over its limit, then 429 with Retry-After and {detail}; within the limit nothing is refused', async () => {
        const at = await gateway({ rateLimits: { perSecond: 1, burst: 5, createsPerMinute: 0 } });
        const [busy, calm] = [await issue(), await issue()];

        const within = await Promise.all(Array.from({ length: 5 }, () => fetch(`${at}/api/v1/api-keys`, { headers: { 'x-service-api-key': calm } })));
        const burst = await Promise.all(Array.from({ length: 8 }, () => fetch(`${at}/api/v1/api-keys`, { headers: { 'x-service-api-key': busy } })));

        assert.deepEqual(
          within.map((r) => r.status),
          [200, 200, 200, 200, 200],
        );
        const refused = burst.filter((r) => r.status === 429);
        assert.ok(refused.length >= 3 && refused.length <= 4, `${refused.length} refused of 8 with a burst of 5 (one may have refilled)`);
        assert.equal(burst.filter((r) => r.status === 200).length, 8 - refused.length);
        assert.equal(refused[0]!.headers.get('retry-after'), '1');
        assert.match(((await refused[0]!.json()) as { detail: string }).detail, /^Rate limit reached: 1 requests per second per API key \(bursts up to 5\)/);
      });

      test('when a key makes more creates per minute than allowed, then the extra create is a 429 telling when to retry, reads still pass', async () => {
        const at = await gateway({ rateLimits: { perSecond: 100, burst: 100, createsPerMinute: 2 } });
        const k = await issue();
        const before = stubs.runCreates;

        const creates = [];
        for (let i = 0; i < 3; i++) creates.push(await createRun(`limit-${i}`, undefined, at, k));
        const read = await fetch(`${at}/api/v1/api-keys`, { headers: { 'x-service-api-key': k } });

        assert.deepEqual(
          creates.map((r) => r.status),
          [202, 202, 429],
        );
        const wait = Number(creates[2]!.headers.get('retry-after'));
        assert.ok(wait >= 29 && wait <= 30, `Retry-After ${wait}: one create comes back every 30 s`);
        assert.match(((await creates[2]!.json()) as { detail: string }).detail, /2 creates per minute per API key/);
        assert.equal(read.status, 200);
        assert.equal(stubs.runCreates - before, 2);
      });

      test('when one key calls two gateways on one database, then both draw on the same budget', async () => {
        const limits = { perSecond: 1, burst: 4, createsPerMinute: 0 };
        const [a, b] = [await gateway({ rateLimits: limits }), await gateway({ rateLimits: limits })];
        const k = await issue();
        const call = (at: string) => fetch(`${at}/api/v1/api-keys`, { headers: { 'x-service-api-key': k } });

        const statuses = [];
        for (const at of [a, b, a, b, a, b]) statuses.push((await call(at)).status);

        assert.deepEqual(statuses.slice(0, 4), [200, 200, 200, 200]);
        assert.ok(statuses.slice(4).includes(429), `the fifth and sixth calls across both: ${statuses}`);
      });
    });
  });
}
