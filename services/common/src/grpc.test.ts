import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RunServiceService } from '../../../gen/ats/run/v1/run.js';
import { NotFoundError, RemoteError, Status } from './errors.js';
import { GrpcServer, ServingStatus, createServiceClient, implement } from './grpc.js';
import { createLogger } from './logger.js';

describe('gRPC server and client helpers', () => {
  const logger = createLogger('test', 'silent');
  const server = new GrpcServer([
    {
      name: 'ats.run.v1.RunService',
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
        },
        logger,
      ),
    },
  ]);
  let client: ReturnType<typeof createServiceClient<typeof RunServiceService>>;

  before(async () => {
    const port = await server.listen('127.0.0.1', 0);
    client = createServiceClient(RunServiceService, `127.0.0.1:${port}`, 10000);
  });
  after(async () => {
    client.close();
    await server.stop(1000);
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
    assert.equal(await client.checkHealth('ats.run.v1.RunService'), ServingStatus.SERVING);
  });
});

test('when nothing listens at the address, then a call fails fast with UNAVAILABLE', async () => {
  const client = createServiceClient(RunServiceService, '127.0.0.1:1', 5000);
  try {
    await assert.rejects(client.api.listAgents({}), (err: unknown) => err instanceof RemoteError && err.code === Status.UNAVAILABLE);
  } finally {
    client.close();
  }
});
