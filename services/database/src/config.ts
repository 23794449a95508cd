import { commonFields, int, loadConfig } from '../../common/src/config.js';

export const databaseConfigSpec = {
  logLevel: commonFields.logLevel,
  dataDir: commonFields.dataDir,
  shutdownTimeoutMs: commonFields.shutdownTimeoutMs,
  idleInTransactionMs: int('DATABASE_IDLE_IN_TRANSACTION_MS', { default: 30000, min: 100, max: 3600000, describe: 'A client idle this long inside a transaction while another waits for the embedded database is rolled back and disconnected' }),
};

export type DatabaseConfig = ReturnType<typeof loadDatabaseConfig>;

/** The embedded database process's configuration from the environment. */
export function loadDatabaseConfig(source: Record<string, string | undefined> = process.env) {
  return loadConfig(databaseConfigSpec, source);
}
