/**
 * knex on Postgres (DATABASE_URL: the service's tables live in its own schema) or on a PGlite of
 * the service's own (no DATABASE_URL: data in DATA_DIR/<service>/pgdata, guarded by a lock file).
 * The launcher's embedded database (embedded-database.ts) is reached by DATABASE_URL, as Postgres.
 * Migrations are code (a list per service) and run at start; on Postgres, under an advisory lock
 * per schema, so any number of replicas may start at once on an empty database.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import knexFactory, { type Knex } from 'knex';
import { pgliteTemplatesDir } from './config.js';
import { acquireLock, type LockFile } from './lock-file.js';
import type { Logger } from './logger.js';
import type { TemplateLayer } from './pglite-template.js';

export type { Knex };

/** One migration, named `YYYYMMDDHHmmss_what`. */
export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

export interface DatabaseOptions {
  /** Service name: the PGlite folder and the default Postgres schema. */
  service: string;
  dataDir: string;
  databaseUrl?: string | undefined;
  /** Postgres schema; defaults to the service name with `-` → `_`. */
  schema?: string;
  migrations: Migration[];
  logger?: Logger;
}

/** An open database. `count()` normalises PGlite's numbers and pg's strings. */
export interface Database {
  readonly knex: Knex;
  /**
   * 'pglite': one session serves every query in turn (the service's own PGlite, or the launcher's
   * embedded database over DATABASE_URL), so a transaction must never wait on anything but its
   * own queries. 'pg': Postgres, many sessions.
   */
  readonly driver: 'pglite' | 'pg';
  readonly schema: string | undefined;
  stop(): Promise<void>;
}

/** `count(*)` comes back as a number from PGlite and a string from pg. */
export function toCount(v: unknown): number {
  return typeof v === 'string' ? Number.parseInt(v, 10) : Number(v ?? 0);
}

function migrationSource(migrations: Migration[]): Knex.MigrationSource<Migration> {
  return {
    getMigrations: async () => [...migrations].sort((a, b) => a.name.localeCompare(b.name)),
    getMigrationName: (m) => m.name,
    getMigration: async (m) => ({ up: m.up, down: m.down ?? (async () => {}) }),
  };
}

/**
 * What a service's PGlite template holds: its migrations applied. Named by the service and a hash
 * of the migrations' names and code, so a new directory never starts from another version's tables.
 */
function migratedLayer(service: string, migrations: Migration[]): TemplateLayer {
  const hash = createHash('sha256');
  for (const m of [...migrations].sort((a, b) => a.name.localeCompare(b.name))) hash.update(`${m.name}\0${m.up.toString()}\0`);
  return {
    name: `${service}-${hash.digest('hex').slice(0, 12)}`,
    async prepare(pgdata) {
      const { openPglite } = await import('./pglite.js');
      const pglite = await openPglite(pgdata, ''); // a copy of the base: there is nothing to seed, so no templates folder
      const knex = await pgliteKnex(pglite);
      try {
        await migrate(knex, migrations);
      } finally {
        await knex.destroy();
        if (!pglite.closed) await pglite.close();
      }
    },
  };
}

/** Loaded only where a service opens a PGlite of its own: a service on DATABASE_URL never loads PGlite. */
async function pgliteKnex(pglite: PGlite): Promise<Knex> {
  const { default: ClientPgLite } = await import('knex-pglite');
  return knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, dialect: 'postgres', connection: { pglite } } as Knex.Config);
}

async function migrate(knex: Knex, migrations: Migration[], schema?: string): Promise<string[]> {
  const [, applied] = (await knex.migrate.latest({ migrationSource: migrationSource(migrations), ...(schema ? { schemaName: schema } : {}) })) as [number, string[]];
  return applied;
}

/**
 * Creates the schema and runs pending migrations on one connection that holds a session advisory
 * lock keyed by the schema: replicas starting together wait for the first, then find nothing to
 * do. Holding the lock, a knex migration lock left set by a process that died mid-migration is
 * stale, and is freed.
 */
async function migrateLocked(databaseUrl: string, schema: string, migrations: Migration[]): Promise<string[]> {
  // min 1: the pool keeps its one connection (the session holding the lock) for the whole migration.
  const one = knexFactory({ client: 'pg', connection: databaseUrl, searchPath: [schema], pool: { min: 1, max: 1 } });
  const key = `ats.migrate.${schema}`;
  try {
    await one.raw('select pg_advisory_lock(hashtext(?))', [key]);
    await one.raw(`create schema if not exists "${schema}"`);
    const lockTable = await one.schema.withSchema(schema).hasTable('knex_migrations_lock');
    if (lockTable) await one.migrate.forceFreeMigrationsLock({ schemaName: schema });
    return await migrate(one, migrations, schema);
  } finally {
    await one.raw('select pg_advisory_unlock(hashtext(?))', [key]).catch(() => undefined);
    await one.destroy();
  }
}

/** True when the server behind a URL is PGlite (the embedded database): one session for every client. */
async function isPglite(knex: Knex): Promise<boolean> {
  const r = await knex.raw('select version() as v');
  return /\bPGlite\b/.test(String(r.rows[0]?.v ?? ''));
}

/** Opens the database, creating the schema or data dir, and runs pending migrations. */
export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  let knex: Knex;
  let lock: LockFile | undefined;
  let schema: string | undefined;
  if (opts.databaseUrl) {
    schema = opts.schema ?? opts.service.replace(/-/g, '_');
    if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
    knex = knexFactory({
      client: 'pg',
      connection: opts.databaseUrl,
      searchPath: [schema],
      pool: { min: 0, max: 10 },
    });
  } else {
    const dir = path.join(opts.dataDir, opts.service);
    fs.mkdirSync(dir, { recursive: true });
    lock = acquireLock(path.join(dir, '.lock'));
    try {
      const { openPglite } = await import('./pglite.js');
      const pglite = await openPglite(path.join(dir, 'pgdata'), pgliteTemplatesDir(opts.dataDir), migratedLayer(opts.service, opts.migrations));
      knex = await pgliteKnex(pglite);
      await knex.raw('select 1');
    } catch (err) {
      lock.release();
      throw err;
    }
  }
  let singleSession = !opts.databaseUrl;
  try {
    const applied = opts.databaseUrl ? await migrateLocked(opts.databaseUrl, schema!, opts.migrations) : await migrate(knex, opts.migrations);
    if (applied.length) opts.logger?.info({ migrations: applied }, 'migrations applied');
    if (opts.databaseUrl) singleSession = await isPglite(knex);
  } catch (err) {
    await knex.destroy();
    lock?.release();
    throw err;
  }
  let stopped = false;
  return {
    knex,
    driver: singleSession ? 'pglite' : 'pg',
    schema,
    async stop() {
      if (stopped) return;
      stopped = true;
      await knex.destroy();
      lock?.release();
    },
  };
}
