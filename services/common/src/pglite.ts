/**
 * Embedded PGlite opened lean. The stack's database process (services/database), or a service
 * started alone, holds one PGlite for its life, so what it keeps resident is the stack's idle footprint:
 * - Postgres's default 128 MB of shared buffers are touched as pages are read and never given
 *   back; the stack's tables are small, and a page that is not in them is a read of a file the
 *   kernel caches, so 8 MB do (PGlite has no other backend to share with; 16 MB held 7 MB more);
 * - initdb (a fresh data directory) loads a second WebAssembly Postgres whose memory V8 does not
 *   give back while the process lives (≈ 500 MB PSS after the first start; a worker thread still
 *   leaves ≈ 100 MB behind); it runs in a short-lived child process, so only the opened database stays.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
// Before PGlite: importing this module is what puts PGlite's WebAssembly on the baseline compiler.
import { WASM_BASELINE_ONLY } from './wasm-baseline.js';
import { PGlite } from '@electric-sql/pglite';
import { seedPgdata, type TemplateLayer } from './pglite-template.js';

const run = promisify(execFile);

/** PGlite's own start parameters (it replaces, not extends, them when given any) plus smaller buffers. */
export const PGLITE_START_PARAMS = [
  '--single', '-F', '-O', '-j',
  '-c', 'search_path=public',
  '-c', 'exit_on_error=false',
  '-c', 'log_checkpoints=false',
  '-c', 'max_worker_processes=0',
  '-c', 'max_parallel_workers=0',
  '-c', 'max_parallel_workers_per_gather=0',
  '-c', 'io_method=sync',
  '-c', 'max_parallel_maintenance_workers=0',
  '-c', 'shared_buffers=8MB',
];

/**
 * Creates the data directory (plain JavaScript: it runs the same from sources and from dist;
 * arguments: module URL, directory, start parameters as JSON). Only the `postgres` database that
 * PGlite opens is kept: template0 and template1 are two thirds of the files to copy (pglite-template.ts).
 */
const INITDB = `
const [module, dir, params] = process.argv.slice(1);
const { PGlite } = await import(module);
const db = new PGlite(dir, { startParams: JSON.parse(params) });
await db.waitReady;
await db.exec("update pg_database set datistemplate = false where datname in ('template0', 'template1')");
await db.exec('drop database template0');
await db.exec('drop database template1');
await db.exec('checkpoint');
await db.close();
`;

/** Runs initdb into `dir` in a child process (see the top of this file). */
export async function initdb(dir: string): Promise<void> {
  const args = [WASM_BASELINE_ONLY, '--input-type=module', '-e', INITDB, import.meta.resolve('@electric-sql/pglite'), dir, JSON.stringify(PGLITE_START_PARAMS)];
  try {
    await run(process.execPath, args, { env: {}, maxBuffer: 4 << 20 });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`PGlite could not create its database: ${(e.stderr ?? e.message).trim().split('\n').slice(-3).join(' ')}`, { cause: err });
  }
}

/**
 * Opens the PGlite database in `dir`; a new one is a copy of the template kept in `templatesDir`
 * (pglite-template.ts), or of `layer`'s template made from it.
 */
export async function openPglite(dir: string, templatesDir: string, layer?: TemplateLayer): Promise<PGlite> {
  if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) await seedPgdata(dir, templatesDir, layer);
  const db = new PGlite(dir, { startParams: PGLITE_START_PARAMS });
  await db.waitReady;
  return db;
}
