import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { RunServiceService, type ListAgentsRequest } from '../../../gen/ats/run/v1/run.js';
import { NotFoundError, RemoteError, Status } from './errors.js';
import { GrpcServer, ServingStatus, callSignal, createServiceClient, implement, serviceName } from './grpc.js';
import { InternalToken } from './internal-token.js';
import { createLogger, currentRequestId, withRequestId } from './logger.js';
import { within } from '../../../test/support/until.js';

const token = InternalToken.generate();

describe('gRPC server and client helpers', () => {
  const logger = createLogger('test', 'silent');
  const server = new GrpcServer([
    {
      definition: RunServiceService,
      implementation: implement(
        RunServiceService,
        {
          async listAgents() {
            return { agents: [] };
          },
          async getRun(req) {
            throw new NotFoundError(`Run ${req.runId} not found`);
          },
          async stopRun() {
            throw new Error('db password=hunter2 exploded');
          },
          listRuns: () => new Promise(() => {}),
          async watchEvents(_req, call) {
            call.write({ event: undefined });
          },
        },
        logger,
      ),
    },
  ], token);
  let client: ReturnType<typeof createServiceClient<typeof RunServiceService>>;
  let address: string;

  before(async () => {
    address = `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
    client = createServiceClient(RunServiceService, address, 10000, token);
  });
  after(async () => {
    client.close();
    await server.stop(1000);
  });

  /** Calls ListAgents with exactly `md`, bypassing the helper client (which always adds the token). */
  function rawListAgents(md: grpc.Metadata): Promise<number> {
    const raw = new grpc.Client(address, grpc.credentials.createInsecure());
    const def = RunServiceService.listAgents;
    return new Promise<number>((resolve) => {
      raw.makeUnaryRequest(def.path, (v: ListAgentsRequest) => def.requestSerialize(v), (b: Buffer) => def.responseDeserialize(b), {}, md, (err) => {
        raw.close();
        resolve(err ? err.code : Status.OK);
      });
    });
  }

  test('when a caller sends no internal token or a wrong one, then every call is refused UNAUTHENTICATED before its handler runs, but health answers', async () => {
    assert.equal(await rawListAgents(new grpc.Metadata()), Status.UNAUTHENTICATED, 'no metadata');
    const bare = new grpc.Metadata();
    bare.set('authorization', 'Bearer ');
    assert.equal(await rawListAgents(bare), Status.UNAUTHENTICATED, 'an empty bearer');
    assert.equal(await rawListAgents(token.apply(new grpc.Metadata())), Status.OK, 'the token alone');

    const other = createServiceClient(RunServiceService, address, 5000, InternalToken.generate());
    try {
      await assert.rejects(other.api.listAgents({}), (err: unknown) => {
        assert.ok(err instanceof RemoteError);
        assert.equal(err.code, Status.UNAUTHENTICATED);
        assert.equal(err.publicMessage, undefined, 'not a message for end users');
        return true;
      });
      const stream = other.api.watchEvents({ projectId: 'p', agent: 1, runId: 'r', after: 0 });
      const code = await new Promise<number>((resolve) => {
        stream.on('data', () => resolve(-1));
        stream.on('error', (err: grpc.ServiceError) => resolve(err.code));
      });
      assert.equal(code, Status.UNAUTHENTICATED, 'a server stream is refused too');
      // Kubernetes' gRPC probes send no metadata: health stays open.
      assert.equal(await other.checkHealth(''), ServingStatus.SERVING);
    } finally {
      other.close();
    }
  });

  test('when a caller sends the internal token, then a server stream answers', async () => {
    const stream = client.api.watchEvents({ projectId: 'p', agent: 1, runId: 'r', after: 0 });
    const got = await new Promise<string>((resolve) => {
      stream.on('data', () => resolve('data'));
      stream.on('error', (err: Error) => resolve(err.message));
    });
    assert.equal(got, 'data');
  });

  test('when a handler answers, then the client gets the message', async () => {
    assert.deepEqual(await client.api.listAgents({}), { agents: [] });
  });

  test('when a handler throws an AppError, then the client gets its status and public message', async () => {
    await assert.rejects(client.api.getRun({ projectId: 'p', agent: 1, runId: 'run_x' }), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.code, Status.NOT_FOUND);
      assert.equal(err.publicMessage, 'Run run_x not found');
      return true;
    });
  });

  test('when a handler throws an unexpected error, then the client sees INTERNAL without internals', async () => {
    await assert.rejects(client.api.stopRun({ projectId: 'p', agent: 1, runId: 'r' }), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.code, Status.INTERNAL);
      assert.doesNotMatch(err.message, /hunter2/);
      return true;
    });
  });

  test('when a method has no handler, then it answers UNIMPLEMENTED naming the method', async () => {
    await assert.rejects(client.api.listSessions({ projectId: 'p', agent: 0, status: 0, limit: 1, cursor: '' }), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.code, Status.UNIMPLEMENTED);
      assert.equal(err.publicMessage, 'ListSessions is not implemented yet');
      return true;
    });
  });

  test('when a handler never answers, then the call fails at its deadline', async () => {
    const started = Date.now();
    await assert.rejects(client.api.listRuns({ projectId: 'p', agent: 0, sessionId: '', status: 0, limit: 1, cursor: '' }, { deadlineMs: 300 }), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.code, Status.DEADLINE_EXCEEDED);
      return true;
    });
    assert.ok(Date.now() - started < 3000);
  });

  test('when the health service is asked, then the server and the service report SERVING', async () => {
    assert.equal(await client.checkHealth(''), ServingStatus.SERVING);
    assert.equal(await client.checkHealth(serviceName(RunServiceService)), ServingStatus.SERVING);
  });
});

test('when nothing listens at the address, then a call fails fast with UNAVAILABLE', async () => {
  const client = createServiceClient(RunServiceService, '127.0.0.1:1', 5000, token);
  try {
    await assert.rejects(client.api.listAgents({}), (err: unknown) => err instanceof RemoteError && err.code === Status.UNAVAILABLE);
  } finally {
    client.close();
  }
});

describe('the request id of a call', () => {
  const lines: { msg: string; service: string; requestId?: string; method?: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)));
      cb();
    },
  });
  const frontLog = createLogger('front', 'info', sink);
  const backLog = createLogger('back', 'info', sink);
  const heardBack: (string | undefined)[] = [];
  // "back" stands for a downstream service, "front" for one that calls it from its handler.
  const back = new GrpcServer([
    {
      definition: RunServiceService,
      implementation: implement(RunServiceService, {
        async listAgents() {
          heardBack.push(currentRequestId());
          backLog.info('back serves');
          return { agents: [] };
        },
      }, backLog),
    },
  ], token);
  let downstream: ReturnType<typeof createServiceClient<typeof RunServiceService>>;
  /** Domain code: it knows nothing of requests and logs through the service logger it was given. */
  const domain = { work: async () => { await new Promise((r) => setTimeout(r, 5)); frontLog.info('domain works'); } };
  const front = new GrpcServer([
    {
      definition: RunServiceService,
      implementation: implement(RunServiceService, {
        async listAgents() {
          await domain.work();
          return downstream.api.listAgents({});
        },
        async getRun() {
          throw new Error('exploded');
        },
      }, frontLog),
    },
  ], token);
  let client: ReturnType<typeof createServiceClient<typeof RunServiceService>>;

  before(async () => {
    downstream = createServiceClient(RunServiceService, `127.0.0.1:${await back.listen('127.0.0.1', 0)}`, 5000, token);
    client = createServiceClient(RunServiceService, `127.0.0.1:${await front.listen('127.0.0.1', 0)}`, 5000, token);
  });
  after(async () => {
    client.close();
    downstream.close();
    await Promise.all([front.stop(1000), back.stop(1000)]);
  });

  test('when a call carries x-request-id, then every log line of its handler, its domain code and the service it calls carries that id', async () => {
    await client.api.listAgents({}, { requestId: 'req-grpc-1' });
    assert.deepEqual(heardBack, ['req-grpc-1'], 'the downstream call carried the id without being told');
    const mine = lines.filter((l) => l.msg === 'domain works' || l.msg === 'back serves');
    assert.deepEqual(mine.map((l) => [l.service, l.msg, l.requestId]), [['front', 'domain works', 'req-grpc-1'], ['back', 'back serves', 'req-grpc-1']]);
  });

  test('when a handler fails, then the failure is logged under the request id', async () => {
    await assert.rejects(client.api.getRun({ projectId: 'p', agent: 0, runId: 'r' }, { requestId: 'req-grpc-2' }));
    const failed = lines.find((l) => l.msg === 'handler failed');
    assert.equal(failed?.requestId, 'req-grpc-2');
    assert.equal(failed?.method, 'GetRun');
  });

  test('when a client calls within a request context, then it sends that id; an explicit one wins; none outside a request', async () => {
    heardBack.length = 0;
    await withRequestId('req-ctx-1', () => downstream.api.listAgents({}));
    await withRequestId('req-ctx-1', () => downstream.api.listAgents({}, { requestId: 'req-explicit' }));
    await downstream.api.listAgents({});
    assert.deepEqual(heardBack, ['req-ctx-1', 'req-explicit', undefined]);
  });
});

describe('a client of a service with several replicas', () => {
  const logger = createLogger('test', 'silent');
  /** A replica of the run service that counts the ListAgents calls it answers. */
  function replica() {
    const r: { calls: number; server: GrpcServer } = {
      calls: 0,
      server: new GrpcServer([
        {
          definition: RunServiceService,
          implementation: implement(RunServiceService, { listAgents: async () => (r.calls++, { agents: [] }) }, logger),
        },
      ], token),
    };
    return r;
  }

  test('when the target lists two replicas, then calls are spread over both; when one dies, then within seconds every call reaches the other', async () => {
    const a = replica();
    const b = replica();
    const target = `ipv4:127.0.0.1:${await a.server.listen('127.0.0.1', 0)},127.0.0.1:${await b.server.listen('127.0.0.1', 0)}`;
    const client = createServiceClient(RunServiceService, target, 5000, token);
    try {
      await Promise.all([client.checkHealth(), client.checkHealth()]); // both connections up
      for (let i = 0; i < 20; i++) await client.api.listAgents({});
      assert.ok(a.calls >= 5 && b.calls >= 5, `calls spread over both replicas (got ${a.calls} and ${b.calls})`);

      b.server.server.forceShutdown(); // as a crash would: connections close under the client
      const before = a.calls;
      const deadline = Date.now() + 3000;
      let inARow = 0;
      while (inARow < 20) {
        assert.ok(Date.now() < deadline, `20 calls in a row succeed within 3 s of a replica dying (${inARow} so far)`);
        inARow = await client.api.listAgents({}).then(() => inARow + 1, () => 0);
      }
      assert.ok(a.calls - before >= 20, 'the surviving replica answered them');
    } finally {
      client.close();
      await a.server.stop(500);
      await b.server.stop(500);
    }
  });

  test('when the only replica restarts, then a call made as soon as it listens again succeeds', async () => {
    const first = replica();
    const port = await first.server.listen('127.0.0.1', 0);
    const client = createServiceClient(RunServiceService, `127.0.0.1:${port}`, 5000, token);
    try {
      await client.api.listAgents({});
      first.server.server.forceShutdown();
      await assert.rejects(client.api.listAgents({}), (err: unknown) => err instanceof RemoteError && err.code === Status.UNAVAILABLE, 'down: UNAVAILABLE');
      const second = replica();
      await second.server.listen('127.0.0.1', port);
      try {
        await client.api.listAgents({});
        assert.equal(second.calls, 1);
      } finally {
        await second.server.stop(500);
      }
    } finally {
      client.close();
    }
  });
});

describe('a call its caller gives up on', () => {
  test('when the deadline of a call passes while it is handled, then the handler sees its signal aborted', async () => {
    const logger = createLogger('test', 'silent');
    let aborted!: () => void;
    const sawAbort = new Promise<void>((r) => (aborted = r));
    let started!: () => void;
    const handling = new Promise<void>((r) => (started = r));
    const server = new GrpcServer([
      {
        definition: RunServiceService,
        implementation: implement(
          RunServiceService,
          {
            async listAgents(_req, call) {
              const signal = callSignal(call);
              started();
              await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
              aborted();
              return { agents: [] };
            },
          },
          logger,
        ),
      },
    ], token);
    const client = createServiceClient(RunServiceService, `127.0.0.1:${await server.listen('127.0.0.1', 0)}`, 10000, token);
    try {
      const call = client.api.listAgents({}, { deadlineMs: 300 });
      await within(handling, 'the call handled');
      await assert.rejects(call, (err: unknown) => err instanceof RemoteError && err.code === Status.DEADLINE_EXCEEDED);
      await within(sawAbort, "the handler's signal aborted", 5000);
    } finally {
      client.close();
      await server.stop(1000);
    }
  });
});

