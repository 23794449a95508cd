/** Composition root of the file-storage service: config → database → blob store → HTTP + gRPC → signals. */
import { FileKind } from '../../../gen/ats/filestorage/v1/file_storage.js';
import { agentEnum } from '../../common/src/agent-name.js';
import { openDatabase } from '../../common/src/db.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { fileResource } from '../../common/src/resources.js';
import { startWebhookRelay } from '../../webhooks/src/client/outbox-sink.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { serveGrpc } from '../../common/src/service-host.js';
import { runMain } from '../../common/src/shutdown.js';
import { Signer, loadSigningSecret } from '../../common/src/signing.js';
import { openBlobStore } from './blob-store.factory.js';
import { createBlobServer } from './blob.http.js';
import { loadFileStorageConfig } from './config.js';
import { FileRepository, migrations } from './file.repository.js';
import { FileStorage } from './file-storage.js';
import { createFileStorageServer } from './server.js';

runMain('file-storage', async () => {
  const config = loadFileStorageConfig();
  const logger = createLogger('file-storage', config.logLevel);
  const token = loadInternalToken(config);
  const db = await openDatabase({ service: 'file-storage', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const blobs = await openBlobStore(config.store, logger).catch(async (err: unknown) => {
    await db.stop();
    throw err;
  });
  const { store } = blobs;
  // The hook runs only once a file is written, after `files` exists (it signs the download link).
  const repo = new FileRepository(db.knex, (trx, f) =>
    recordOutboxEvent(trx, {
      projectId: f.projectId,
      type: 'file.created',
      orderingKey: f.runId,
      data: fileResource({ ...f, id: f.fileId, kind: FileKind.FILE_KIND_OUTPUT, agent: agentEnum(f.agent), downloadUrl: files.fileDownloadUrl(f), uploaded: true, workspaceId: undefined }),
    }),
  );
  const relay = startWebhookRelay({ service: 'file-storage', knex: db.knex, driver: db.driver, webhooksAddr: config.webhooksAddr, outboxPollMs: config.outboxPollMs, grpcDeadlineMs: config.grpcDeadlineMs, token, logger });
  const files: FileStorage = new FileStorage({
    repo,
    store,
    signer: new Signer(loadSigningSecret(config.signingSecret, config.dataDir, 'file-storage')),
    logger,
    publicUrl: config.publicUrl,
    maxFileBytes: config.maxFileBytes,
    uploadTtlSeconds: config.uploadTtlSeconds,
    downloadTtlSeconds: config.downloadTtlSeconds,
  });
  // Never shorter than a download link lives (and a margin): a listed link keeps working to its end.
  const graceMs = Math.max(config.gcGraceSeconds, config.downloadTtlSeconds + 600) * 1000;
  const collect = async () => {
    const r = await files.collectGarbage(graceMs).catch((err: Error) => logger.warn({ err: err.message }, 'blob garbage collection failed'));
    if (r?.deleted) logger.info(r, 'deleted unreferenced blobs');
  };
  const gc = config.gcIntervalSeconds > 0 ? setInterval(() => void collect(), config.gcIntervalSeconds * 1000) : undefined;
  gc?.unref();
  if (gc) void collect();
  const http = createBlobServer(files, store, logger);
  await new Promise<void>((resolve, reject) => http.once('error', reject).listen(config.httpPort, config.httpHost, resolve));
  logger.info({ host: config.httpHost, port: config.httpPort }, 'blob endpoint listening');
  await serveGrpc({
    logger,
    server: createFileStorageServer({ logger, files, token }),
    host: config.grpcHost,
    port: config.grpcPort,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stops: [
      { name: 'blob-gc', stop: () => clearInterval(gc) },
      {
        name: 'blob-http',
        stop: () =>
          new Promise<void>((resolve) => {
            http.close(() => resolve());
            http.closeIdleConnections();
            setTimeout(() => http.closeAllConnections(), Math.floor(config.shutdownTimeoutMs / 4)).unref();
          }),
      },
      { name: 'blob-store', stop: () => blobs.stop() },
      { name: 'webhook-relay', stop: () => relay.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
  });
});
