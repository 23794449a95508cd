/**
 * Service-to-service trust against the real stack (every service its own process, real gRPC on
 * loopback, the stack's own nats-server): internal ports refuse whoever lacks the deployment's
 * credentials, while the services' own calls, which carry them, work.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { connect } from '@nats-io/transport-node';
import { BrowserPoolServiceService } from '../gen/ats/browserpool/v1/browser_pool.js';
import { FileStorageServiceService } from '../gen/ats/filestorage/v1/file_storage.js';
import { LiveViewServiceService } from '../gen/ats/liveview/v1/live_view.js';
import { RunServiceService } from '../gen/ats/run/v1/run.js';
import { Status } from '../services/common/src/errors.js';
import { ServingStatus } from '../services/common/src/grpc.js';
import { InternalToken } from '../services/common/src/internal-token.js';
import type { ServiceName } from '../scripts/stack.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';

let f: StackFixture;
before(async () => {
  f = await startStackFixture({ ownNats: true, env: { POOL_WARM_SIZE: '0' } });
});
after(() => f?.stop());

/** One method of each service, called with an empty request (a valid protobuf message). */
const TARGETS: [ServiceName, string][] = [
  ['run', RunServiceService.listAgents.path],
  ['browser-pool', BrowserPoolServiceService.listBrowsers.path],
  ['file-storage', FileStorageServiceService.listWorkspaces.path],
  ['live-view', LiveViewServiceService.getRecording.path],
];

/** Calls `method` on a service's gRPC port with exactly `md`, as anyone who can reach the port could. */
function call(service: ServiceName, method: string, md: grpc.Metadata): Promise<grpc.status> {
  const client = new grpc.Client(`127.0.0.1:${f.stack.ports.get(service)}`, grpc.credentials.createInsecure());
  const bytes = (b: Buffer) => b;
  return new Promise((resolve) => {
    client.makeUnaryRequest(method, bytes, bytes, Buffer.alloc(0), md, { deadline: Date.now() + 5000 }, (err) => {
      client.close();
      resolve(err ? err.code : Status.OK);
    });
  });
}

function health(service: ServiceName): Promise<grpc.status | ServingStatus> {
  const client = new grpc.Client(`127.0.0.1:${f.stack.ports.get(service)}`, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      new grpc.Metadata(),
      { deadline: Date.now() + 5000 },
      (err, res) => {
        client.close();
        // HealthCheckResponse { status = 1 }: field 1, varint → bytes 0x08 <status>.
        resolve(err ? err.code : (res![1] as ServingStatus));
      },
    );
  });
}

describe('internal gRPC', () => {
  test('when a call to any service carries no internal token or a wrong one, then it is refused UNAUTHENTICATED', async () => {
    const wrong = InternalToken.generate().apply(new grpc.Metadata());
    const forged = new grpc.Metadata();
    forged.set('authorization', 'Bearer prj_victim-0123456789-0123456789-0123456789');
    for (const [service, method] of TARGETS) {
      assert.equal(await call(service, method, new grpc.Metadata()), Status.UNAUTHENTICATED, `${service}: no token`);
      assert.equal(await call(service, method, wrong), Status.UNAUTHENTICATED, `${service}: another deployment's token`);
      assert.equal(await call(service, method, forged), Status.UNAUTHENTICATED, `${service}: a made-up token`);
    }
  });

  test('when a call carries the deployment token, then it passes every service; health answers probes without one', async () => {
    const md = f.stack.internalToken.apply(new grpc.Metadata());
    assert.equal(await call('run', RunServiceService.listAgents.path, md), Status.OK);
    for (const [service, method] of TARGETS) {
      // An empty request may be invalid for the handler; what matters is that the handler ran.
      assert.notEqual(await call(service, method, md), Status.UNAUTHENTICATED, service);
      assert.equal(await health(service), ServingStatus.SERVING, `${service}: health without metadata`);
    }
  });

  test("when the gateway calls the services, then its calls carry the token and the API answers", async () => {
    for (const p of ['/api/v1/agents', '/api/v1/browsers', '/api/v1/agent-workspaces', '/api/v1/agents/browser-agent/runs']) {
      const res = await f.api(p);
      assert.equal(res.status, 200, `${p}: ${await res.text()}\n${f.logs()}`);
    }
    const health = await fetch(`${f.stack.baseUrl}/healthz`);
    assert.equal(health.status, 200);
  });
});

describe('NATS', () => {
  test("when a client connects to the stack's own nats-server without its token or with a wrong one, then it is refused", async () => {
    assert.ok(f.stack.nats, 'the stack started its own nats-server');
    assert.ok(f.stack.natsToken, 'with a token');
    for (const opts of [{}, { token: 'not-the-token-0123456789' }, { user: 'ats', pass: f.stack.natsToken }]) {
      await assert.rejects(connect({ servers: f.stack.natsUrl, reconnect: false, ...opts }), /authorization/i, JSON.stringify(Object.keys(opts)));
    }
    const nc = await connect({ servers: f.stack.natsUrl, reconnect: false, token: f.stack.natsToken });
    await nc.flush();
    await nc.close();
  });

  test('when the stack runs, then neither token is on a command line or in a log line', () => {
    const internal = fs.readFileSync(path.join(f.dataDir, 'internal-token'), 'utf8').trim();
    const nats = f.stack.natsToken!;
    const logs = f.logs();
    assert.ok(logs.length > 0);
    for (const [name, secret] of [['internal', internal], ['nats', nats]] as const) {
      assert.ok(!logs.includes(secret), `the ${name} token is in a log line`);
      for (const pid of f.stack.pids()) {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        assert.ok(!cmdline.includes(secret), `the ${name} token is on the command line of ${pid}`);
      }
    }
  });
});
