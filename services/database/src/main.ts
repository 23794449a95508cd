/**
 * The embedded database process: one PGlite in DATA_DIR/database served to every service of the
 * stack on a Unix socket (services/common/src/embedded-database.ts). The launcher starts it when
 * no DATABASE_URL is set, before the services, and stops it after them.
 */
import { embeddedSocketPath, serveEmbeddedDatabase } from '../../common/src/embedded-database.js';
import { createLogger } from '../../common/src/logger.js';
import { onShutdownSignals, runMain } from '../../common/src/shutdown.js';
import { loadDatabaseConfig } from './config.js';

runMain('database', async () => {
  const config = loadDatabaseConfig();
  const logger = createLogger('database', config.logLevel);
  const served = await serveEmbeddedDatabase(config.dataDir, { logger, idleInTransactionMs: config.idleInTransactionMs });
  onShutdownSignals([{ name: 'database', stop: () => served.stop() }], config.shutdownTimeoutMs, logger);
  logger.info({ socket: embeddedSocketPath(config.dataDir) }, 'listening');
});
