/** The gateway app in-process on port 0 over real HTTP, with stub clients in place of the services. */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { RunServiceService } from '../../gen/ats/run/v1/run.js';
import { ResourceExhaustedError, fromServiceError, toServiceError } from '../../services/common/src/errors.js';
import { createServiceClient } from '../../services/common/src/grpc.js';
import { InternalToken } from '../../services/common/src/internal-token.js';
import { createLogger } from '../../services/common/src/logger.js';
import type { ApiKeyRepository } from './api-key.repository.js';
import { createApp } from './app.js';
import { ApiKeyAuthenticator } from './auth.js';
import type { Clients } from './clients.js';
import { Readiness } from './health.js';

const KEY = 'ats_test_key_0123456789abcdefghijklmnop';
const SECRET = 'password authentication failed for user "ats" at 10.1.2.3:5432';

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

const logLines: string[] = [];
let server: http.Server;
let base: string;
let runClient: ReturnType<typeof createServiceClient<typeof RunServiceService>>;
const readiness = new Readiness();

before(async () => {
  // The run service is a real gRPC client of an address where nothing listens: UNAVAILABLE as in production.
  runClient = createServiceClient(RunServiceService, `127.0.0.1:${await closedPort()}`, 2000, InternalToken.generate());
  const clients = {
    run: runClient,
    browserPool: {
      api: {
        // What the pool raises at its per-project limit, through the wire shape the client decodes.
        createBrowser: async () => {
          throw fromServiceError(toServiceError(new ResourceExhaustedError('This project already has 5 active browsers in use; stop one first', { retryAfterSeconds: 17 })));
        },
      },
    },
    fileStorage: {
      api: {
        listWorkspaces: async () => {
          throw new Error(SECRET);
        },
      },
    },
    liveView: { api: {} },
  } as unknown as Clients;
  const keys = { grantFor: async (key: string) => (key === KEY ? { projectId: 'prj_test', keyId: 'key_test', scope: 'full' } : undefined) } as unknown as ApiKeyRepository;
  const logger = createLogger('gateway', 'info', new Writable({ write: (chunk, _enc, done) => done(void logLines.push(String(chunk))) }));
  const app = createApp({ logger, clients, readiness, auth: new ApiKeyAuthenticator(keys), bodyLimitBytes: 1 << 20, healthDeadlineMs: 300 });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});

after(async () => {
  runClient.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const call = (path: string, init: RequestInit = {}) => fetch(`${base}${path}`, { ...init, headers: { 'x-service-api-key': KEY, ...init.headers } });

test('when a handler fails unexpectedly, then 500 with a generic detail naming the request id; the internals are only in the log', async () => {
  const res = await call('/api/v1/agent-workspaces');

  assert.equal(res.status, 500);
  const id = res.headers.get('x-request-id');
  assert.ok(id);
  const text = await res.text();
  assert.deepEqual(JSON.parse(text), { detail: `Internal server error (request id ${id})` });
  assert.ok(!text.includes('10.1.2.3') && !text.includes('password'), text);
  const logged = logLines.map((l) => JSON.parse(l) as { requestId?: string; err?: { message?: string } }).find((l) => l.requestId === id);
  assert.equal(logged?.err?.message, SECRET, 'the cause is logged under the request id');
});

test('when a service refuses for a limit with a retry-after, then 429 with Retry-After and its public message', async () => {
  const res = await call('/api/v1/browsers', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });

  assert.equal(res.status, 429);
  assert.equal(res.headers.get('retry-after'), '17');
  assert.deepEqual(await res.json(), { detail: 'This project already has 5 active browsers in use; stop one first' });
});

test('when a downstream service is UNAVAILABLE, then 503 at once with a generic detail and no address', async () => {
  const started = Date.now();
  const res = await call('/api/v1/agents');

  assert.equal(res.status, 503);
  const text = await res.text();
  assert.deepEqual(JSON.parse(text), { detail: 'Service unavailable, try again shortly' });
  assert.ok(!text.includes('127.0.0.1'), text);
  assert.ok(Date.now() - started < 2000, 'refused at once, not after the deadline');
});

test('when a downstream service is down, then /healthz answers 503 naming it while /readyz keeps the gateway in service (200 ready)', async () => {
  const health = await fetch(`${base}/healthz`);
  const ready = await fetch(`${base}/readyz`);

  assert.equal(health.status, 503);
  assert.equal(((await health.json()) as { services: Record<string, string> }).services.run, 'UNREACHABLE');
  assert.equal(ready.status, 200);
  assert.deepEqual(await ready.json(), { status: 'ready' });
});

// Last: it drains the shared app for good.
test('when the gateway starts draining at shutdown, then /readyz answers 503 draining (twice is fine) and the API still answers', async () => {
  readiness.drain();
  readiness.drain();

  const ready = await fetch(`${base}/readyz`);
  const api = await call('/api/v1/browsers', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });

  assert.equal(ready.status, 503);
  assert.deepEqual(await ready.json(), { status: 'draining' });
  assert.equal(api.status, 429, 'requests in flight or still arriving are served while draining');
});
