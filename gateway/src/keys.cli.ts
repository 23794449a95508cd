/**
 * `npm run keys -- create [--project P] [--name N] | list | revoke <id-or-prefix>`.
 * Opens the gateway's database directly: DATABASE_URL's, or the embedded database of DATA_DIR,
 * whether the stack runs (through its database process) or not.
 */
import { parseArgs } from 'node:util';
import { openStackDatabase } from '../../services/common/src/embedded-database.js';
import { API_KEY_SCOPES, ApiKeyRepository, migrations, type ApiKeyScope } from './api-key.repository.js';
import { loadGatewayConfig } from './config.js';

const USAGE = 'usage: npm run keys -- create [--project NAME] [--name NAME] [--scope full|read] | list | revoke <key-id-or-prefix>';

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { project: { type: 'string', default: 'default' }, name: { type: 'string', default: 'cli' }, scope: { type: 'string', default: 'full' } },
  });
  const [command, arg] = positionals;
  const scope = values.scope as ApiKeyScope;
  if (!command || !['create', 'list', 'revoke'].includes(command) || (command === 'revoke' && !arg) || !API_KEY_SCOPES.includes(scope)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const config = loadGatewayConfig();
  const db = await openStackDatabase({ service: 'gateway', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations });
  try {
    const repo = new ApiKeyRepository(db.knex);
    if (command === 'create') {
      const { key, info } = await repo.create(values.project!, values.name!, scope);
      process.stdout.write(`${key}\n`);
      process.stderr.write(`created ${info.scope} key ${info.id} (${info.prefix}…) for project ${info.projectName}; it is shown only once\n`);
    } else if (command === 'list') {
      for (const k of await repo.list()) {
        process.stdout.write(`${k.id}\t${k.prefix}…\t${k.projectName}\t${k.name}\t${k.scope}\t${k.createdAt}\t${k.lastUsedAt ? `used ${k.lastUsedAt}` : 'never used'}\t${k.revokedAt ? `revoked ${k.revokedAt}` : 'active'}\n`);
      }
    } else {
      const n = await repo.revoke(arg!);
      if (n === 0) {
        process.stderr.write(`no active key matches ${arg}\n`);
        return 1;
      }
      process.stdout.write(`revoked ${n} key(s)\n`);
    }
    return 0;
  } finally {
    await db.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`keys: ${err.message}\n`);
    process.exit(1);
  },
);
