/** Composition root of the gateway: config → database (keys) → gRPC clients → app → listen → signals. */
import http from 'node:http';
import { openDatabase } from '../../services/common/src/db.js';
import { loadInternalToken } from '../../services/common/src/internal-token.js';
import { createLogger } from '../../services/common/src/logger.js';
import { onShutdownSignals, runMain } from '../../services/common/src/shutdown.js';
import { ApiKeyRepository, migrations } from './api-key.repository.js';
import { createApp } from './app.js';
import { ApiKeyAuthenticator } from './auth.js';
import { Idempotency } from './idempotency.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { RateLimiter } from './rate-limit.js';
import { RateLimitRepository } from './rate-limit.repository.js';
import { closeClients, createClients } from './clients.js';
import { Readiness } from './health.js';
import { answerClientErrors } from './http-errors.js';
import { loadGatewayConfig } from './config.js';

runMain('gateway', async () => {
  const config = loadGatewayConfig();
  const logger = createLogger('gateway', config.logLevel);
  const db = await openDatabase({ service: 'gateway', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const keys = new ApiKeyRepository(db.knex);
  if (config.bootstrapApiKey) {
    await keys.register(config.bootstrapApiKey, config.bootstrapProject, 'bootstrap');
    logger.info({ project: config.bootstrapProject }, 'bootstrap key registered');
  }
  const clients = createClients(config, loadInternalToken(config));
  const readiness = new Readiness();
  const app = createApp({
    logger,
    clients,
    readiness,
    auth: new ApiKeyAuthenticator(keys),
    bodyLimitBytes: config.bodyLimitBytes,
    idempotency: new Idempotency(new IdempotencyRepository(db.knex, { retentionSeconds: config.idempotencyRetentionSeconds, lockSeconds: config.idempotencyLockSeconds }), {
      waitMs: config.idempotencyWaitMs,
    }),
    rateLimiter: new RateLimiter(new RateLimitRepository(db.knex), {
      perSecond: config.rateLimitPerSecond,
      burst: config.rateLimitBurst,
      createsPerMinute: config.rateLimitCreatesPerMinute,
    }),
    corsOrigins: config.corsAllowedOrigins,
    dashboard: { dir: config.dashboardDir, liveViewUrl: config.liveViewBaseUrl, filesUrl: config.filesPublicUrl },
  });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65000;
  answerClientErrors(server);
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(config.port, config.host, resolve));
  const addr = server.address();
  logger.info({ host: config.host, port: typeof addr === 'object' && addr ? addr.port : config.port }, 'listening');
  onShutdownSignals(
    [
      // First: /readyz answers 503 on connections still open (a proxy's keep-alive ones) while
      // in-flight requests finish. New connections are refused from the next step on; in
      // Kubernetes the pod has left the Service's endpoints by then (preStop sleep).
      { name: 'readiness', stop: () => readiness.drain() },
      {
        name: 'http',
        stop: () =>
          new Promise<void>((resolve) => {
            // Finish in-flight requests; long-lived streams are cut after a grace period.
            const force = setTimeout(() => server.closeAllConnections(), Math.floor(config.shutdownTimeoutMs / 2));
            server.close(() => {
              clearTimeout(force);
              resolve();
            });
            server.closeIdleConnections();
          }),
      },
      { name: 'grpc-clients', stop: () => closeClients(clients) },
      { name: 'database', stop: () => db.stop() },
    ],
    config.shutdownTimeoutMs,
    logger,
  );
});
