/**
 * Two gateways in one process, identical but for where GET /agents comes from: A asks the run
 * service over gRPC, B answers from the gateway's own copy of the registry (the baseline).
 * Prints `{"grpcPort","localPort","key"}` once both listen.
 */
import http from 'node:http';
import { openDatabase } from '../../services/common/src/db.js';
import { createLogger } from '../../services/common/src/logger.js';
import { ApiKeyRepository, migrations } from '../../gateway/src/api-key.repository.js';
import { createApp } from '../../gateway/src/app.js';
import { ApiKeyAuthenticator } from '../../gateway/src/auth.js';
import { createClients } from '../../gateway/src/clients.js';
import { presentAgent } from '../../gateway/src/presenters.js';
import { AGENTS } from '../../services/run/src/agents.js';
import { loadConfig, dir, address, optionalStr } from '../../services/common/src/config.js';
import { loadInternalToken } from '../../services/common/src/internal-token.js';

const config = loadConfig({ dataDir: dir('DATA_DIR'), runAddr: address('RUN_SERVICE_ADDR'), internalTokenFile: optionalStr('INTERNAL_TOKEN_FILE') });
const logger = createLogger('bench-gateway', 'warn');
const db = await openDatabase({ service: 'gateway', dataDir: config.dataDir, migrations });
const repo = new ApiKeyRepository(db.knex);
const { key } = await repo.create('bench', 'bench');
const auth = new ApiKeyAuthenticator(repo);
const clients = createClients({ runAddr: config.runAddr, browserPoolAddr: '127.0.0.1:1', fileStorageAddr: '127.0.0.1:1', liveViewAddr: '127.0.0.1:1', webhooksAddr: '127.0.0.1:1', grpcDeadlineMs: 5000 }, loadInternalToken(config));
const local = AGENTS.map(presentAgent);

async function serve(app: http.RequestListener): Promise<number> {
  const server = http.createServer(app);
  server.keepAliveTimeout = 65000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}
const grpcPort = await serve(createApp({ logger, clients, auth, bodyLimitBytes: 1 << 20 }));
const localPort = await serve(createApp({ logger, clients, auth, bodyLimitBytes: 1 << 20, agentSource: async () => local }));
process.stdout.write(`${JSON.stringify({ grpcPort, localPort, key })}\n`);
process.on('SIGTERM', () => process.exit(0));
