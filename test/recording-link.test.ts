/**
 * The recording link's lifetime, by clock rather than by waiting: live-view's GetRecording over
 * real gRPC, a real file-storage (gRPC and blob HTTP, PGlite, files on disk) whose signing clock
 * the test moves. The link works for an hour and not a moment longer.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { RecordingState, LiveViewServiceService } from '../gen/ats/liveview/v1/live_view.js';
import { openDatabase, type Database } from '../services/common/src/db.js';
import { createServiceClient, type GrpcServer, type ServiceClient } from '../services/common/src/grpc.js';
import { InternalToken } from '../services/common/src/internal-token.js';
import { createLogger } from '../services/common/src/logger.js';
import { Signer } from '../services/common/src/signing.js';
import { LocalBlobStore } from '../services/file-storage/src/blob-store.js';
import { createBlobServer } from '../services/file-storage/src/blob.http.js';
import { FileRepository, migrations as fileMigrations } from '../services/file-storage/src/file.repository.js';
import { FileStorage } from '../services/file-storage/src/file-storage.js';
import { createFileStorageServer } from '../services/file-storage/src/server.js';
import type { RecordingRow } from '../services/live-view/src/recording.repository.js';
import { createRecordingStore, recordingKey, type RecordingStore } from '../services/live-view/src/recording-store.js';
import { createLiveViewServer } from '../services/live-view/src/server.js';
import { freePort } from '../scripts/stack.js';
import { tempDir } from './support/infra.js';

const logger = createLogger('test', 'silent');
const token = InternalToken.generate();
const PROJECT = 'prj_link';
const BROWSER = 'brw_link';

let now = Date.parse('2026-11-22T12:00:00Z');
let dir: string;
let db: Database;
let blobs: http.Server;
let storage: GrpcServer;
let liveViewServer: GrpcServer;
let store: RecordingStore;
let client: ServiceClient<typeof LiveViewServiceService>;
let row: RecordingRow | undefined;

before(async () => {
  dir = tempDir('recording-link');
  db = await openDatabase({ service: 'file-storage', dataDir: dir, migrations: fileMigrations });
  const blobStore = new LocalBlobStore(path.join(dir, 'blobs'));
  const blobPort = await freePort();
  const files = new FileStorage({
    repo: new FileRepository(db.knex),
    store: blobStore,
    signer: new Signer('link-test-secret-0123456789-abcdefghij', () => now),
    logger,
    publicUrl: `http://127.0.0.1:${blobPort}`,
    maxFileBytes: 1 << 30,
    uploadTtlSeconds: 900,
    downloadTtlSeconds: 900,
  });
  blobs = createBlobServer(files, blobStore, logger);
  await new Promise<void>((r) => blobs.listen(blobPort, '127.0.0.1', r));
  storage = createFileStorageServer({ logger, files, token });
  const storagePort = await storage.listen('127.0.0.1', 0);
  store = createRecordingStore(`127.0.0.1:${storagePort}`, 5000, token);

  liveViewServer = createLiveViewServer({
    logger,
    token,
    signer: new Signer('live-view-test-secret-0123456789-abcd'),
    baseUrl: 'http://live-view.test',
    tokenTtlSeconds: 3600,
    recordings: { status: async (projectId, browserId) => (row && projectId === row.projectId && browserId === row.browserId ? row : undefined) },
    store,
    recordingUrlTtlSeconds: 3600,
    recordingEnabled: true,
  });
  client = createServiceClient(LiveViewServiceService, `127.0.0.1:${await liveViewServer.listen('127.0.0.1', 0)}`, 5000, token);
});
after(async () => {
  client.close();
  store.close();
  await liveViewServer.stop(100);
  await storage.stop(100);
  await new Promise<void>((r) => blobs.close(() => r()));
  await db.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('when a recording is ready, then its link plays for one hour by the clock and is refused after', async () => {
  const mp4 = path.join(dir, 'video.mp4');
  fs.writeFileSync(mp4, Buffer.from('not really a video, but bytes all the same'));
  await store.put(PROJECT, recordingKey(BROWSER), mp4);
  row = { browserId: BROWSER, projectId: PROJECT, instanceId: 'test', state: 'ready', startedAtMs: 0, stoppedAtMs: 1, width: 2, height: 2, objectKey: recordingKey(BROWSER), sizeBytes: 42, durationMs: 1, attempts: 0, error: null };

  const issuedAt = now;
  const r = await client.api.getRecording({ projectId: PROJECT, browserId: BROWSER });
  assert.equal(r.state, RecordingState.RECORDING_STATE_READY);
  assert.equal(Date.parse(r.expiresAt!), issuedAt + 3600_000);
  const first = await fetch(r.url!);
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('content-type'), 'video/mp4');
  assert.match(first.headers.get('content-disposition') ?? '', /recording-brw_link\.mp4/);

  now = issuedAt + 3599_000;
  assert.equal((await fetch(r.url!)).status, 200, 'a second before the hour is up it still plays');
  now = issuedAt + 3600_000;
  assert.equal((await fetch(r.url!)).status, 403, 'at the hour it is refused');

  const fresh = await client.api.getRecording({ projectId: PROJECT, browserId: BROWSER });
  assert.equal((await fetch(fresh.url!)).status, 200, 'asking again gives a fresh link');
});

test('when the recording is still being made or there is none, then no link is given', async () => {
  row = { ...row!, state: 'finalizing', objectKey: null };
  assert.deepEqual(await client.api.getRecording({ projectId: PROJECT, browserId: BROWSER }), { state: RecordingState.RECORDING_STATE_FINALIZING, url: undefined, expiresAt: undefined });
  row = { ...row, state: 'empty' };
  assert.equal((await client.api.getRecording({ projectId: PROJECT, browserId: BROWSER })).state, RecordingState.RECORDING_STATE_NONE);
  assert.equal((await client.api.getRecording({ projectId: 'prj_other', browserId: BROWSER })).state, RecordingState.RECORDING_STATE_NONE);
});
