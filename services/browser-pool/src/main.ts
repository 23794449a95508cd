/**
 * Composition root of the browser-pool service: config → database → bus → clients → pool (which
 * first takes over or reaps what a previous process of the same instance id left) → CDP proxy →
 * gRPC → registration among the replicas (heartbeat, reaping dead peers) → signals. On SIGTERM:
 * drain (no new browsers; running ones go on up to POOL_DRAIN_TIMEOUT_MS), end viewers' streams,
 * drain gRPC, close the proxy, stop every browser (profiles saved), deregister, then the rest.
 * With POOL_KEEP_BROWSERS_ON_EXIT the browsers are left running instead (no drain wait, no stop,
 * the instance row kept) for the next process to take over.
 */
import path from 'node:path';
import { connectBus } from '../../common/src/bus.js';
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { onShutdownSignals, runMain } from '../../common/src/shutdown.js';
import { Signer, loadSigningSecret } from '../../common/src/signing.js';
import { natsBrowserEvents } from './browser-events.js';
import { BrowserPool } from './browser-pool.js';
import { BrowserRepository, type BrowserChangeHook } from './browser.repository.js';
import { CdpProxy } from './cdp-proxy.js';
import { loadBrowserPoolConfig } from './config.js';
import { browserMessage } from './browser-pool.handlers.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { browserResource } from '../../common/src/resources.js';
import { startWebhookRelay } from '../../webhooks/src/client/outbox-sink.js';
import { Downloads } from './downloads.js';
import { fileStorageDownloadStore } from './file-storage.client.js';
import { liveViewMinter } from './live-view.client.js';
import { migrations } from './migrations.js';
import { ProfileRepository } from './profile.repository.js';
import { Profiles } from './profiles.js';
import { detectConfinement, fitToRoot } from './confinement.js';
import { CpuGroup } from './cpu-group.js';
import { Proxies } from './proxies.js';
import { InstanceRepository } from './instance.repository.js';
import { Instances } from './instances.js';
import { OwnerRouter } from './owner-routing.js';
import { createBrowserPoolServer } from './server.js';

/** The address a peer on this host uses for a server bound to `host` (any interface: loopback). */
const reachable = (host: string) => (['0.0.0.0', '::', ''].includes(host) ? '127.0.0.1' : host);

runMain('browser-pool', async () => {
  const config = loadBrowserPoolConfig();
  const logger = createLogger('browser-pool', config.logLevel);
  const token = loadInternalToken(config);
  const home = path.join(config.dataDir, 'browser-pool');
  const db = await openDatabase({ service: 'browser-pool', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const bus = await connectBus(config.natsUrl, 'browser-pool', logger, { token: config.natsToken });
  const outbox: BrowserChangeHook = (trx, b, change) =>
    recordOutboxEvent(trx, { projectId: b.projectId, type: change, orderingKey: b.id, data: browserResource(browserMessage(b)) });
  const browsers = new BrowserRepository(db.knex, db.driver, outbox);
  const relay = startWebhookRelay({ service: 'browser-pool', knex: db.knex, driver: db.driver, webhooksAddr: config.webhooksAddr, outboxPollMs: config.outboxPollMs, grpcDeadlineMs: config.grpcDeadlineMs, token, logger });
  const profiles = new Profiles({ repo: new ProfileRepository(db.knex), maxStateBytes: config.profileStateMaxBytes, logger });
  const store = fileStorageDownloadStore(config.fileStorageAddr, config.grpcDeadlineMs, token);
  // A create does not wait long for its live view link: one not minted in time is minted right after (see remintUntilMinted).
  const liveView = liveViewMinter(config.liveViewAddr, Math.min(config.grpcDeadlineMs, 2000), token);
  const signer = new Signer(loadSigningSecret(config.signingSecret, config.dataDir, 'browser-pool'));
  const instances = new Instances({
    repo: new InstanceRepository(db.knex, outbox),
    id: config.instanceId,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
    restartGraceMs: config.keepBrowsersOnExit ? config.restartGraceMs : 0,
    token,
    grpcDeadlineMs: config.grpcDeadlineMs,
    logger,
    onReaped: (r) => pool.announceReaped(r.browsers),
    onBeat: () => pool.endStoppedElsewhere().catch((err) => logger.error({ err }, 'browsers recorded stopped by peers not ended')),
  });
  const cpuGroup = CpuGroup.open({ rootDir: path.join(home, 'browsers'), shares: config.browserCpuShares, logger });
  const pool = new BrowserPool({
    browsers,
    profiles,
    downloads: new Downloads({ repo: browsers, store, logger, ttlSeconds: config.downloadUrlTtlSeconds }),
    liveView,
    events: natsBrowserEvents(bus.nc, logger),
    proxies: new Proxies(config.proxies),
    egress: config.egress,
    adblockLists: config.adblockLists,
    signer,
    cdpWsBase: config.cdpWsBase,
    cdpInternalBase: config.cdpInternalBase,
    instanceId: config.instanceId,
    endElsewhere: (row) => router.endAtOwner(row),
    rootDir: path.join(home, 'browsers'),
    // Without a restart to wait for, a browser ends with its pool's connection, as it did with the pipe.
    restartGraceMs: config.keepBrowsersOnExit ? config.restartGraceMs : 0,
    chromium: {
      executable: config.chromiumPath,
      confinement: fitToRoot(
        detectConfinement({ mode: config.browserConfinement, uidBase: config.browserUidBase, noSandbox: config.chromiumNoSandbox, policyDir: path.join(home, 'chromium-etc') }, logger),
        path.join(home, 'browsers'),
        logger,
      ),
      extraArgs: config.chromiumArgs,
      nice: config.browserNice,
      cpuGroup,
    },
    screencast: { quality: config.screencastQuality, everyNthFrame: config.screencastEveryNthFrame, maxWidth: 0, maxHeight: 0 },
    warmSize: config.warmSize,
    warmMax: config.warmMax,
    warmWindowMs: config.warmWindowSeconds * 1000,
    warmParallelLaunches: config.warmParallelLaunches,
    reuseIdleMs: config.reuseSeconds * 1000,
    parallelLaunches: config.parallelLaunches,
    maxBrowsers: config.maxBrowsers,
    maxActivePerProject: config.maxActivePerProject,
    defaultTimeoutMinutes: config.defaultTimeoutMinutes,
    idleTimeoutSeconds: config.idleTimeoutSeconds,
    reaperIntervalMs: config.reaperIntervalMs,
    defaultWidth: config.defaultScreenWidth,
    defaultHeight: config.defaultScreenHeight,
    logger,
  });
  const router = new OwnerRouter({ runsHere: (id) => pool.runsHere(id), browsers, instances, logger });
  // The same instance again (a restart): its row is renewed first, so peers leave its browsers
  // alone while they are taken over; then they are reattached; then it registers and beats.
  await instances.resume();
  await pool.start();
  // Runs block ads by default: the lists are parsed now (on a worker thread), not at the first run.
  void pool.adBlocker().catch(() => {});
  const proxy = new CdpProxy({
    backend: { live: (id) => pool.live(id), publicUrl: (b) => pool.publicUrl(b), owner: (id, to) => router.cdpOwner(id, to), ownerUnreachable: (id) => router.ownerUnreachable(id) },
    signer,
    logger,
  });
  const cdpPort = await proxy.listen(config.cdpHost, config.cdpPort);
  logger.info({ host: config.cdpHost, port: cdpPort }, 'cdp proxy listening');
  const cdpUrl = config.advertiseCdpUrl ?? `ws://${reachable(config.cdpHost)}:${cdpPort}`;
  // The run service is handed the owner's own proxy (no relay hop) unless CDP_INTERNAL_URL says otherwise.
  pool.useCdpInternalBase(cdpUrl);
  const server = createBrowserPoolServer({ logger, pool, profiles, token, router });
  const port = await server.listen(config.grpcHost, config.grpcPort);
  bus.reportTo(server.health);
  logger.info({ host: config.grpcHost, port }, 'listening');
  await instances.start({ grpcAddr: config.advertiseGrpcAddr ?? `${reachable(config.grpcHost)}:${port}`, cdpUrl });
  onShutdownSignals(
    [
      {
        name: 'drain',
        stop: async () => {
          await instances.drain();
          // Browsers left for the next process are not waited for.
          const empty = await pool.drain(config.keepBrowsersOnExit ? 0 : config.drainTimeoutMs);
          if (config.keepBrowsersOnExit) logger.info('leaving the browsers running for the next process (POOL_KEEP_BROWSERS_ON_EXIT)');
          else if (!empty) logger.info({ drainTimeoutMs: config.drainTimeoutMs }, 'drain time is up; stopping the remaining browsers');
        },
      },
      { name: 'viewers', stop: () => pool.endStreams() },
      { name: 'grpc', stop: () => server.stop(Math.floor(config.shutdownTimeoutMs / 4)) },
      { name: 'cdp-proxy', stop: () => proxy.stop() },
      { name: 'browsers', stop: async () => (await (config.keepBrowsersOnExit ? pool.detachAll() : pool.stopAll()), cpuGroup?.remove()) },
      { name: 'instance', stop: () => instances.stop({ keepRow: config.keepBrowsersOnExit }) },
      { name: 'clients', stop: () => (store.close(), liveView.close()) },
      { name: 'webhook-relay', stop: () => relay.stop() },
      { name: 'nats', stop: () => bus.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
    config.shutdownTimeoutMs,
    logger,
  );
});
