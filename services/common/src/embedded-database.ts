/**
 * The stack's embedded database: one PGlite in DATA_DIR/database, served to every service by the
 * database process (services/database) over a Unix socket there (pglite-server.ts). The launcher
 * starts it and hands each service a DATABASE_URL naming the socket; each service keeps its tables
 * in its own schema, as on Postgres.
 *
 * A data directory made before this (one PGlite per service, DATA_DIR/<service>/pgdata) keeps
 * that layout: nothing is moved, and the launcher starts no database process for it.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pgliteTemplatesDir } from './config.js';
import { openDatabase, type Database, type DatabaseOptions } from './db.js';
import { generateOnce } from './internal-token.js';
import { acquireLock } from './lock-file.js';
import type { Logger } from './logger.js';

/** The services that keep tables, each in DATA_DIR/<service>/pgdata in the older layout. */
const SERVICES_WITH_TABLES = ['gateway', 'run', 'browser-pool', 'file-storage', 'live-view', 'webhooks'];

/** Where the shared database lives: its data, lock, password and socket. */
export function embeddedDatabaseDir(dataDir: string): string {
  return path.join(dataDir, 'database');
}

/** The socket a client connects to (the name libpq looks for in a socket folder, with port 5432). */
export function embeddedSocketPath(dataDir: string): string {
  return path.join(embeddedDatabaseDir(dataDir), '.s.PGSQL.5432');
}

/** Unix socket paths longer than this do not fit in sockaddr_un. */
const MAX_SOCKET_PATH = 107;

/**
 * The password clients give, kept in DATA_DIR/database/password (mode 0600, made on first use).
 * The folder is made 0700: only this user reaches the socket at all.
 */
export function embeddedDatabasePassword(dataDir: string): string {
  const dir = embeddedDatabaseDir(dataDir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const file = path.join(dir, 'password');
  generateOnce(file);
  return fs.readFileSync(file, 'utf8').trim();
}

/** The DATABASE_URL of the shared database of `dataDir` (it holds the password: never log it). */
export function embeddedDatabaseUrl(dataDir: string, password?: string): string {
  const socket = embeddedSocketPath(dataDir);
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) throw new Error(`the embedded database's socket path is too long for a Unix socket (${Buffer.byteLength(socket)} > ${MAX_SOCKET_PATH} bytes): use a shorter DATA_DIR`);
  return `postgresql://ats:${encodeURIComponent(password ?? embeddedDatabasePassword(dataDir))}@${encodeURIComponent(path.dirname(socket))}/ats`;
}

/** True when `dataDir` holds the older layout (a PGlite per service), which is then kept. */
export function hasPerServiceDatabases(dataDir: string): boolean {
  return SERVICES_WITH_TABLES.some((s) => fs.existsSync(path.join(dataDir, s, 'pgdata', 'PG_VERSION')));
}

/** True when the database process of `dataDir` accepts connections. */
export function embeddedDatabaseRunning(dataDir: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(embeddedSocketPath(dataDir));
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** The embedded database, served from this process. */
export interface ServedDatabase {
  /** The DATABASE_URL to give clients. */
  readonly url: string;
  /** Ends every connection, closes PGlite and lets go of the lock. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Opens DATA_DIR/database's PGlite (holding its lock: another process serving it makes this throw)
 * and serves it on its socket. The database process runs this; so does a tool run while the stack
 * is stopped. PGlite is loaded here only, not by what merely connects.
 */
export async function serveEmbeddedDatabase(dataDir: string, o: { logger?: Logger; idleInTransactionMs?: number } = {}): Promise<ServedDatabase> {
  const password = embeddedDatabasePassword(dataDir);
  const url = embeddedDatabaseUrl(dataDir, password);
  const lock = acquireLock(path.join(embeddedDatabaseDir(dataDir), '.lock'));
  try {
    const [{ openPglite }, { PgliteServer }] = await Promise.all([import('./pglite.js'), import('./pglite-server.js')]);
    const pglite = await openPglite(path.join(embeddedDatabaseDir(dataDir), 'pgdata'), pgliteTemplatesDir(dataDir));
    const server = new PgliteServer({ db: pglite, password, ...o });
    try {
      await server.listen(embeddedSocketPath(dataDir));
    } catch (err) {
      await pglite.close();
      throw err;
    }
    let stopped: Promise<void> | undefined;
    return {
      url,
      stop: () =>
        (stopped ??= (async () => {
          try {
            await server.stop();
            await pglite.close();
          } finally {
            lock.release();
          }
        })()),
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}

/**
 * Opens a service's database the way the stack gives it to the service: DATABASE_URL's Postgres,
 * the older layout's PGlite of its own, or the embedded database (through the running database
 * process, or served from here while the stack is stopped). For tools beside the stack (the keys CLI).
 */
export async function openStackDatabase(opts: DatabaseOptions): Promise<Database> {
  if (opts.databaseUrl || hasPerServiceDatabases(opts.dataDir)) return openDatabase(opts);
  if (await embeddedDatabaseRunning(opts.dataDir)) return openDatabase({ ...opts, databaseUrl: embeddedDatabaseUrl(opts.dataDir) });
  const served = await serveEmbeddedDatabase(opts.dataDir, opts.logger ? { logger: opts.logger } : {});
  let db: Database;
  try {
    db = await openDatabase({ ...opts, databaseUrl: served.url });
  } catch (err) {
    await served.stop();
    throw err;
  }
  return {
    ...db,
    async stop() {
      await db.stop();
      await served.stop();
    },
  };
}
