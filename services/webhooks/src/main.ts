/** Composition root of the webhooks service: config → database → dispatcher → gRPC → signals. */
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { serveGrpc } from '../../common/src/service-host.js';
import { runMain } from '../../common/src/shutdown.js';
import { loadWebhooksConfig } from './config.js';
import { Dispatcher } from './dispatcher.js';
import { createWebhooksServer } from './server.js';
import { WebhookRepository, migrations } from './webhook.repository.js';
import { Webhooks } from './webhooks.js';

runMain('webhooks', async () => {
  const config = loadWebhooksConfig();
  const logger = createLogger('webhooks', config.logLevel);
  const token = loadInternalToken(config);
  const db = await openDatabase({ service: 'webhooks', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const repo = new WebhookRepository(db.knex);
  const policy = { allowLoopback: config.allowLoopback, deniedPorts: config.deniedPorts };
  if (config.allowLoopback) logger.warn('WEBHOOK_ALLOW_LOOPBACK: webhooks may be delivered to loopback addresses (local development only)');
  const dispatcher = new Dispatcher({ repo, logger, policy, ...config });
  const webhooks = new Webhooks({ repo, policy, onDeliveries: () => dispatcher.wake() });
  await serveGrpc({
    logger,
    server: createWebhooksServer({ logger, webhooks, token }),
    host: config.grpcHost,
    port: config.grpcPort,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stops: [
      { name: 'dispatcher', stop: () => dispatcher.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
  });
  dispatcher.start();
});
