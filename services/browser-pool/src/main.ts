/**
 * Composition root of the browser-pool service: config → database → bus → clients → pool (which
 * first reaps what a crashed predecessor left) → CDP proxy → gRPC → signals. On SIGTERM: end
 * viewers' streams, drain gRPC, close the proxy, stop every browser (profiles saved), then the rest.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { connectBus } from '../../common/src/bus.js';
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { onShutdownSignals, runMain } from '../../common/src/shutdown.js';
import { Signer, loadSigningSecret } from '../../common/src/signing.js';
import { natsBrowserEvents } from './browser-events.js';
import { BrowserPool } from './browser-pool.js';
import { BrowserRepository } from './browser.repository.js';
import { CdpProxy } from './cdp-proxy.js';
import { loadBrowserPoolConfig } from './config.js';
import { Downloads } from './downloads.js';
import { fileStorageDownloadStore } from './file-storage.client.js';
import { liveViewMinter } from './live-view.client.js';
import { migrations } from './migrations.js';
import { ProfileRepository } from './profile.repository.js';
import { Profiles } from './profiles.js';
import { detectConfinement, fitToRoot } from './confinement.js';
import { Proxies } from './proxies.js';
import { createBrowserPoolServer } from './server.js';

/** A stable id of this pool's data directory: a restart finds and stops its own leftovers only. */
function instanceId(dir: string): string {
  const file = path.join(dir, 'instance-id');
  try {
    const id = fs.readFileSync(file, 'utf8').trim();
    if (id) return id;
  } catch {
    /* first start */
  }
  fs.mkdirSync(dir, { recursive: true });
  const id = `bpi_${randomBytes(12).toString('hex')}`;
  fs.writeFileSync(file, id);
  return id;
}

runMain('browser-pool', async () => {
  const config = loadBrowserPoolConfig();
  const logger = createLogger('browser-pool', config.logLevel);
  const token = loadInternalToken(config);
  const home = path.join(config.dataDir, 'browser-pool');
  const db = await openDatabase({ service: 'browser-pool', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const bus = await connectBus(config.natsUrl, 'browser-pool', logger, { token: config.natsToken });
  const browsers = new BrowserRepository(db.knex, db.driver);
  const profiles = new Profiles({ repo: new ProfileRepository(db.knex), maxStateBytes: config.profileStateMaxBytes, logger });
  const store = fileStorageDownloadStore(config.fileStorageAddr, config.grpcDeadlineMs, token);
  const liveView = liveViewMinter(config.liveViewAddr, config.grpcDeadlineMs, token);
  const signer = new Signer(loadSigningSecret(config.signingSecret, config.dataDir, 'browser-pool'));
  const pool = new BrowserPool({
    browsers,
    profiles,
    downloads: new Downloads({ repo: browsers, store, logger, ttlSeconds: config.downloadUrlTtlSeconds }),
    liveView,
    events: natsBrowserEvents(bus.nc, logger),
    proxies: new Proxies(config.proxies),
    egress: config.egress,
    signer,
    cdpWsBase: config.cdpWsBase,
    cdpInternalBase: config.cdpInternalBase,
    instanceId: instanceId(home),
    rootDir: path.join(home, 'browsers'),
    chromium: {
      executable: config.chromiumPath,
      confinement: fitToRoot(
        detectConfinement({ mode: config.browserConfinement, uidBase: config.browserUidBase, noSandbox: config.chromiumNoSandbox, policyDir: path.join(home, 'chromium-etc') }, logger),
        path.join(home, 'browsers'),
        logger,
      ),
      extraArgs: config.chromiumArgs,
    },
    screencast: { quality: config.screencastQuality, everyNthFrame: config.screencastEveryNthFrame, maxWidth: 0, maxHeight: 0 },
    warmSize: config.warmSize,
    maxActivePerProject: config.maxActivePerProject,
    defaultTimeoutMinutes: config.defaultTimeoutMinutes,
    idleTimeoutSeconds: config.idleTimeoutSeconds,
    reaperIntervalMs: config.reaperIntervalMs,
    defaultWidth: config.defaultScreenWidth,
    defaultHeight: config.defaultScreenHeight,
    logger,
  });
  await pool.start();
  const proxy = new CdpProxy({ backend: pool, signer, logger });
  const cdpPort = await proxy.listen(config.cdpHost, config.cdpPort);
  logger.info({ host: config.cdpHost, port: cdpPort }, 'cdp proxy listening');
  pool.useCdpInternalBase(`ws://${['0.0.0.0', '::', ''].includes(config.cdpHost) ? '127.0.0.1' : config.cdpHost}:${cdpPort}`);
  const server = createBrowserPoolServer({ logger, pool, profiles, token });
  const port = await server.listen(config.grpcHost, config.grpcPort);
  logger.info({ host: config.grpcHost, port }, 'listening');
  onShutdownSignals(
    [
      { name: 'viewers', stop: () => pool.endStreams() },
      { name: 'grpc', stop: () => server.stop(Math.floor(config.shutdownTimeoutMs / 4)) },
      { name: 'cdp-proxy', stop: () => proxy.stop() },
      { name: 'browsers', stop: () => pool.stopAll() },
      { name: 'clients', stop: () => (store.close(), liveView.close()) },
      { name: 'nats', stop: () => bus.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
    config.shutdownTimeoutMs,
    logger,
  );
});
