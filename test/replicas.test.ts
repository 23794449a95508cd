/**
 * Two replicas of every service on one Postgres and one NATS, every gRPC target listing both
 * replicas (as a headless Service would): ten processes start together on an empty database
 * and all serve, and calls spread over the replicas.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HealthService } from '../gen/grpc/health/v1/health.js';
import { ServingStatus, createServiceClient } from '../services/common/src/grpc.js';
import { SERVICE_NAMES } from '../scripts/stack.js';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';

const pg = await postgresUrl();

describe('two replicas of every service on one Postgres', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let db: FreshDatabase;

  before(async () => {
    db = await freshDatabase(pg!, 'ats_replicas');
    f = await startStackFixture({ databaseUrl: db.url, replicas: 2, env: { POOL_WARM_SIZE: '0' } });
  });
  after(async () => {
    await f?.stop();
    await db?.drop();
  });

  test('when ten service processes start at once on an empty database, then all ten serve and each migration ran once', async () => {
    const ports = [
      ...SERVICE_NAMES.filter((s) => s !== 'gateway').map((s) => f.stack.ports.get(s)!),
      ...f.stack.replicas.filter((r) => r.service !== 'gateway').map((r) => r.port),
    ];
    assert.equal(ports.length, 8);
    for (const port of ports) {
      const client = createServiceClient(HealthService, `127.0.0.1:${port}`, 2000, f.stack.internalToken);
      try {
        assert.equal(await client.checkHealth(), ServingStatus.SERVING, `the service on ${port} serves`);
      } finally {
        client.close();
      }
    }
    const gateways = [f.stack.gatewayPort, ...f.stack.replicas.filter((r) => r.service === 'gateway').map((r) => r.port)];
    for (const port of gateways) {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(res.status, 200, `the gateway on ${port} sees every service: ${await res.clone().text()}`);
      await res.body?.cancel();
    }
    for (const schema of ['gateway', 'run', 'browser_pool', 'file_storage', 'live_view']) {
      const { rows } = await db.knex.raw(`select name, count(*)::int as n from "${schema}".knex_migrations group by name`);
      assert.ok(rows.length > 0, `${schema} was migrated`);
      assert.deepEqual(rows.filter((r: { n: number }) => r.n !== 1), [], `each migration of ${schema} ran once`);
    }
  });
});
