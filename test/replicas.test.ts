/**
 * Two replicas of every service on one Postgres, one NATS and one S3 server, every gRPC target
 * listing both replicas (as a headless Service would): twelve processes start together on an empty
 * database and all serve; calls spread over the replicas; a file uploaded through one
 * file-storage replica is served by the other, also after the first is killed and its disk lost.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FileStorageServiceService } from '../gen/ats/filestorage/v1/file_storage.js';
import { HealthService } from '../gen/grpc/health/v1/health.js';
import { ServingStatus, createServiceClient } from '../services/common/src/grpc.js';
import { SERVICE_NAMES, type ServiceName } from '../scripts/stack.js';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';

const pg = await postgresUrl();

describe('two replicas of every service on one Postgres', { skip: !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
  let f: StackFixture;
  let db: FreshDatabase;

  before(async () => {
    db = await freshDatabase(pg!, 'ats_replicas');
    f = await startStackFixture({ databaseUrl: db.url, replicas: 2, blobStore: 's3', logLevel: 'debug', projects: ['alpha'], env: { ...NOT_RECORDED, POOL_WARM_SIZE: '0' } });
  });
  after(async () => {
    await f?.stop();
    await db?.drop();
  });

  test('when both replicas of every service start at once on an empty database, then all serve and each migration ran once', async () => {
    const ports = [
      ...SERVICE_NAMES.filter((s) => s !== 'gateway').map((s) => f.stack.ports.get(s)!),
      ...f.stack.replicas.filter((r) => r.service !== 'gateway').map((r) => r.port),
    ];
    assert.equal(ports.length, 2 * (SERVICE_NAMES.length - 1), 'two of each service but the gateway');
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
    for (const schema of ['gateway', 'run', 'browser_pool', 'file_storage', 'live_view', 'webhooks']) {
      const { rows } = await db.knex.raw(`select name, count(*)::int as n from "${schema}".knex_migrations group by name`);
      assert.ok(rows.length > 0, `${schema} was migrated`);
      assert.deepEqual(rows.filter((r: { n: number }) => r.n !== 1), [], `each migration of ${schema} ran once`);
    }
  });

  const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
  const second = (service: ServiceName) => f.stack.replicas.find((r) => r.service === service)!;
  /** The same link, on another port (another replica of the same edge). */
  const onPort = (link: string, port: number) => Object.assign(new URL(link), { port: String(port) }).toString();
  /** A gateway call without the fixture's reply check (which knows the first gateway only). */
  const apiAt = (port: number, url: string, method = 'GET', body?: unknown) =>
    fetch(`http://127.0.0.1:${port}${url}`, {
      method,
      headers: { 'x-service-api-key': f.projects.alpha!.key, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  /** How many gRPC calls each file-storage replica answered (its debug log). */
  const fileStorageCalls = () => {
    const lines = f.logs('file-storage').split('\n').filter((l) => l.includes('"call received"'));
    return { first: lines.filter((l) => !l.startsWith('file-storage | [2] ')).length, second: lines.filter((l) => l.startsWith('file-storage | [2] ')).length };
  };

  const bytes = randomBytes(300_000);
  let fileId = '';
  let runId = '';

  test('when a file is uploaded through one file-storage replica, then a run made through the other gateway attaches it, and both replicas serve it', async () => {
    const before = fileStorageCalls();
    const added = await apiAt(f.stack.gatewayPort, '/api/v1/agents/browser-agent/files', 'POST', { files: [{ name: 'notes.bin' }] });
    assert.equal(added.status, 201, await added.clone().text());
    const [item] = ((await added.json()) as { items: { id: string; upload_url: string }[] }).items;
    fileId = item!.id;
    assert.equal(new URL(item!.upload_url).port, String(f.stack.edgePorts.get('files')), 'the link names the first replica');
    assert.equal((await fetch(item!.upload_url, { method: 'PUT', body: new Uint8Array(bytes) })).status, 200);

    const created = await apiAt(second('gateway').port, '/api/v1/agents/browser-agent/runs', 'POST', { task: 'Extract the title', attached_file_ids: [fileId] });
    assert.equal(created.status, 202, await created.clone().text());
    const run = (await created.json()) as { id: string; missingFileIds: string[] };
    runId = run.id;
    assert.deepEqual(run.missingFileIds, []);

    for (let i = 0; i < 10; i++) {
      const listed = await apiAt(second('gateway').port, `/api/v1/agents/browser-agent/runs/${runId}/files?kind=input`);
      assert.equal(listed.status, 200);
      const { items } = (await listed.json()) as { items: { id: string; downloadUrl: string }[] };
      assert.deepEqual(items.map((x) => x.id), [fileId]);
      const link = i % 2 ? items[0]!.downloadUrl : onPort(items[0]!.downloadUrl, second('file-storage').edgePorts.get('files')!);
      assert.equal(sha(Buffer.from(await (await fetch(link)).arrayBuffer())), sha(bytes), `download ${i} through replica ${i % 2 ? 1 : 2}`);
    }
    const after = fileStorageCalls();
    assert.ok(after.first > before.first && after.second > before.second, `gRPC calls reached both file-storage replicas (${JSON.stringify({ before, after })})`);
  });

  test('when the file-storage replica that took the upload is killed and its disk lost, then the other serves every file and object', async () => {
    assert.ok(runId, 'the upload test ran');
    const first = createServiceClient(FileStorageServiceService, `127.0.0.1:${f.stack.ports.get('file-storage')}`, 5000, f.stack.internalToken);
    const both = createServiceClient(FileStorageServiceService, f.stack.address('file-storage'), 5000, f.stack.internalToken);
    const projectId = f.projects.alpha!.projectId;
    const shot = randomBytes(50_000);
    try {
      // A screenshot, as the pool stores one: through the first replica only.
      const { stream, response } = first.api.putObject();
      stream.write({ header: { projectId, key: 'screenshots/replica-test.png', contentType: 'image/png' } });
      stream.write({ chunk: shot });
      stream.end();
      assert.equal((await response).sizeBytes, shot.length);

      await f.stack.kill('file-storage');
      fs.rmSync(path.join(f.dataDir, 'file-storage'), { recursive: true, force: true });

      const listed = await apiAt(second('gateway').port, `/api/v1/agents/browser-agent/runs/${runId}/files?kind=input`);
      assert.equal(listed.status, 200, await listed.clone().text());
      const { items } = (await listed.json()) as { items: { id: string; downloadUrl: string }[] };
      const link = onPort(items[0]!.downloadUrl, second('file-storage').edgePorts.get('files')!);
      assert.equal(sha(Buffer.from(await (await fetch(link)).arrayBuffer())), sha(bytes));

      const chunks: Buffer[] = [];
      for await (const m of both.api.getObject({ projectId, key: 'screenshots/replica-test.png' })) chunks.push(Buffer.from(m.chunk));
      assert.equal(sha(Buffer.concat(chunks)), sha(shot), 'the object is read from the store by the surviving replica');
    } finally {
      first.close();
      both.close();
      await f.stack.startService('file-storage');
    }
  });
});
