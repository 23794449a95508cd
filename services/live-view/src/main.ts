/** Composition root of the live-view service: config → database → bus → webhook relay → recorder → HTTP edge + gRPC → signals. */
import { connectBus } from '../../common/src/bus.js';
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { serveGrpc } from '../../common/src/service-host.js';
import { runMain } from '../../common/src/shutdown.js';
import { Signer, loadSigningSecret } from '../../common/src/signing.js';
import { loadLiveViewConfig } from './config.js';
import { childHost } from './child-host.js';
import { Ffmpeg } from './ffmpeg.js';
import { createLiveViewHttp } from './live-view.http.js';
import { loadPageAssets } from './page-assets.js';
import { PartStore, scratchDir } from './part-store.js';
import { createPoolClient } from './pool-client.js';
import { Recorder } from './recorder.js';
import { RecordingRepository, migrations } from './recording.repository.js';
import { Finalizer } from './recording-finalizer.js';
import { RecordingLeases } from './recording-leases.js';
import { createRecordingStore } from './recording-store.js';
import { recordingReadyAnnouncer } from './recording-events.js';
import { createLiveViewServer } from './server.js';
import { startWebhookRelay } from '../../webhooks/src/client/outbox-sink.js';
import { ViewerHub } from './viewer-hub.js';

runMain('live-view', async () => {
  const config = loadLiveViewConfig();
  const logger = createLogger('live-view', config.logLevel);
  const token = loadInternalToken(config);
  const db = await openDatabase({ service: 'live-view', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const bus = await connectBus(config.natsUrl, 'live-view', logger, { token: config.natsToken });
  const signer = new Signer(loadSigningSecret(config.signingSecret, config.dataDir, 'live-view'));
  const pool = createPoolClient(config.browserPoolAddr, config.grpcDeadlineMs, token);
  const store = createRecordingStore(config.fileStorageAddr, config.grpcDeadlineMs, token);
  childHost.onLoop = config.spawnOnLoop;
  const ffmpeg = new Ffmpeg({ ffmpegPath: config.ffmpegPath, ffprobePath: config.ffprobePath });
  const repo = new RecordingRepository(db.knex);
  const settings = {
    ffmpegPath: config.ffmpegPath,
    fps: config.recordingFps,
    crf: config.recordingCrf,
    preset: config.recordingPreset,
    dir: config.recordingDir,
    maxWidth: config.recordingMaxWidth,
    maxHeight: config.recordingMaxHeight,
    partMs: config.recordingPartMs,
  };
  const leases = new RecordingLeases({ repo, instanceId: config.instanceId, leaseMs: config.recordingLeaseMs, renewMs: config.recordingRenewMs, logger });
  const parts = new PartStore({ repo, store, ffmpeg, holder: leases.holder, dir: scratchDir(config.recordingDir, config.instanceId), logger });
  const relay = startWebhookRelay({ service: 'live-view', knex: db.knex, driver: db.driver, webhooksAddr: config.webhooksAddr, outboxPollMs: config.outboxPollMs, grpcDeadlineMs: config.grpcDeadlineMs, token, logger });
  const announceReady = recordingReadyAnnouncer({ pool, store, recordingUrlTtlSeconds: config.recordingUrlTtlSeconds, logger });
  const finalizer = new Finalizer({ repo, store, ffmpeg, parts, concurrency: config.recordingFinalizeConcurrency, logger, announceReady });
  const recorder = new Recorder({
    repo,
    source: pool,
    finalizer,
    ffmpeg,
    settings,
    parts,
    leases,
    logger,
    reconcileMs: config.recordingReconcileSeconds * 1000,
    lookbackMs: config.recordingLookbackHours * 3600_000,
    startConcurrency: config.recordingStartConcurrency,
  });
  // Without recording, finished recordings are still served and unfinished ones still finalised.
  await recorder.start(bus.nc, config.recordingEnabled);

  const hub = new ViewerHub({ source: pool, logger, lingerMs: config.feedLingerMs, maxViewersPerBrowser: config.maxViewersPerBrowser });
  const http = createLiveViewHttp({
    signer,
    hub,
    source: pool,
    assets: loadPageAssets(),
    logger,
    frameAncestors: config.frameAncestors,
    maxUnacked: config.maxUnackedFrames,
    maxFps: config.maxViewerFps,
  });
  await new Promise<void>((resolve, reject) => http.server.once('error', reject).listen(config.httpPort, config.httpHost, resolve));
  logger.info({ host: config.httpHost, port: config.httpPort }, 'live view page listening');

  await serveGrpc({
    bus,
    logger,
    server: createLiveViewServer({
      logger,
      token,
      signer,
      baseUrl: config.baseUrl,
      tokenTtlSeconds: config.tokenTtlSeconds,
      recordings: recorder,
      store,
      recordingUrlTtlSeconds: config.recordingUrlTtlSeconds,
      recordingEnabled: config.recordingEnabled,
    }),
    host: config.grpcHost,
    port: config.grpcPort,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stops: [
      { name: 'live-view-http', stop: () => http.stop() },
      { name: 'viewer-hub', stop: () => hub.stop() },
      { name: 'recorder', stop: () => recorder.stop() },
      { name: 'finalizer', stop: () => finalizer.stop(Math.floor(config.shutdownTimeoutMs / 4)) },
      // Last of the recording steps: what is let go of is taken over by another replica at once.
      { name: 'leases', stop: () => leases.stop() },
      { name: 'ffmpeg', stop: () => (ffmpeg.stop(), childHost.close()) },
      { name: 'clients', stop: () => (pool.close(), store.close()) },
      { name: 'webhook-relay', stop: () => relay.stop() },
      { name: 'nats', stop: () => bus.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
  });
});
