/**
 * A new PGlite data directory starts as a copy of a pristine one. PGlite's initdb costs about
 * 10 s of CPU (measured here: 9.5 s, against 2 s to open an existing directory), and a stack
 * makes one per service: six at once on `make up`, and one per service for every test stack.
 * The first process to need a template builds it under a lock, beside the others waiting; every
 * data directory after that is a copy (about 40 MB).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { acquireLock, LockHeldError } from './lock-file.js';
import { initdb } from './pglite.js';

/** How long a process waits for another to build the template before building its own copy. */
const TEMPLATE_WAIT_MS = 120_000;

/** The installed PGlite's version: a template made by another version is not used. Read once. */
let version: string | undefined;
function pgliteVersion(): string {
  return (version ??= readPgliteVersion());
}

function readPgliteVersion(): string {
  const require = createRequire(import.meta.url);
  let dir = path.dirname(require.resolve('@electric-sql/pglite'));
  while (!fs.existsSync(path.join(dir, 'package.json')) || JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name !== '@electric-sql/pglite') {
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
  return String(JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version);
}

/** Runs initdb into a fresh folder and moves it into place whole, so a template is never half made. */
async function initInto(target: string): Promise<void> {
  const building = `${target}.building-${process.pid}`;
  fs.rmSync(building, { recursive: true, force: true });
  try {
    await initdb(building);
    fs.renameSync(building, target);
  } catch (err) {
    fs.rmSync(building, { recursive: true, force: true }); // a failed build leaves nothing behind
    // Another process's template came first (its lock was taken over as stale): that one is used.
    if (!fs.existsSync(path.join(target, 'PG_VERSION'))) throw err;
  }
}

/** Templates this process is building or has found, by folder: databases opened together in one process share one build (the lock file is per process). */
const templates = new Map<string, Promise<string>>();

function template(templatesDir: string): Promise<string> {
  const target = path.join(templatesDir, `pglite-${pgliteVersion()}`);
  let found = templates.get(target);
  if (!found) {
    found = findOrBuild(target);
    templates.set(target, found);
    found.catch(() => templates.delete(target));
  }
  return found;
}

/** The template at `target`, built by this process when no other is building it. */
async function findOrBuild(target: string): Promise<string> {
  const templatesDir = path.dirname(target);
  const deadline = Date.now() + TEMPLATE_WAIT_MS;
  fs.mkdirSync(templatesDir, { recursive: true, mode: 0o700 });
  while (!fs.existsSync(target)) {
    try {
      const lock = acquireLock(`${target}.lock`);
      try {
        if (!fs.existsSync(target)) await initInto(target);
      } finally {
        lock.release();
      }
    } catch (err) {
      if (!(err instanceof LockHeldError) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return target;
}

/**
 * Makes `pgdata` when it holds no database: a copy of the template in `templatesDir` (built once),
 * copied beside it and renamed into place, so a crash mid-copy leaves no half directory.
 */
export async function seedPgdata(pgdata: string, templatesDir: string): Promise<void> {
  if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) return;
  // A folder without PG_VERSION never finished initdb (older code made it in place): made again in place.
  if (fs.existsSync(pgdata) && fs.readdirSync(pgdata).length) return initdb(pgdata);
  fs.rmSync(pgdata, { recursive: true, force: true });
  const copying = `${pgdata}.copying-${process.pid}`;
  fs.rmSync(copying, { recursive: true, force: true });
  const source = await template(templatesDir);
  if (!fs.existsSync(source)) templates.delete(source); // removed since this process found it: build it again
  try {
    fs.cpSync(await template(templatesDir), copying, { recursive: true });
    fs.renameSync(copying, pgdata);
  } catch (err) {
    fs.rmSync(copying, { recursive: true, force: true }); // a failed copy leaves nothing behind
    throw err;
  }
}
