/**
 * A new PGlite data directory starts as a copy of a pristine one. PGlite's initdb costs about
 * 10 s of CPU (measured here: 9.5 s, against 2 s to open an existing directory), and a stack
 * makes one per service: six at once on `make up`, and one per service for every test stack.
 * The first process to need a template builds it under a lock, beside the others waiting; every
 * data directory after that is a copy.
 *
 * A service's databases start from a second template made from the first: its migrations
 * already applied (`TemplateLayer`), so a new directory is a copy and nothing more. The base
 * holds only the `postgres` database (initdb's template0 and template1 are dropped: nothing
 * here creates databases), which makes a copy 290 files instead of 970. Measured here: a
 * service's new database cost 0.9–1.0 CPU-s to copy, open and migrate; a copy is 0.25 s of it.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { waitForLock } from './lock-file.js';
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

/**
 * What a service's template adds to the base: `name` says which content it holds (the service and
 * a hash of its migrations, so changed migrations make a new template), `prepare` makes it in a
 * copy of the base.
 */
export interface TemplateLayer {
  name: string;
  prepare(pgdata: string): Promise<void>;
}

/** A layer's templates not used for this long are removed when another of the same service is built (older code's). */
const STALE_LAYER_MS = 24 * 3600_000;

/** Makes a template in a fresh folder and moves it into place whole, so a template is never half made. */
async function buildInto(target: string, make: (dir: string) => Promise<void>): Promise<void> {
  const building = `${target}.building-${process.pid}`;
  fs.rmSync(building, { recursive: true, force: true });
  try {
    await make(building);
    fs.renameSync(building, target);
  } catch (err) {
    fs.rmSync(building, { recursive: true, force: true }); // a failed build leaves nothing behind
    // Another process's template came first (its lock was taken over as stale): that one is used.
    if (!fs.existsSync(path.join(target, 'PG_VERSION'))) throw err;
  }
}

/** Templates this process is building or has found, by folder: databases opened together in one process share one build (the lock file is per process). */
const templates = new Map<string, Promise<string>>();

/** The base template (`-lean`: an earlier layout kept initdb's template databases), or a layer's on it. */
function template(templatesDir: string, layer?: TemplateLayer): Promise<string> {
  const base = path.join(templatesDir, `pglite-${pgliteVersion()}-lean`);
  const target = layer ? `${base}-${layer.name}` : base;
  let found = templates.get(target);
  if (!found) {
    found = layer
      ? template(templatesDir).then((from) =>
          findOrBuild(target, async (dir) => {
            removeStaleLayers(templatesDir, path.basename(target));
            fs.cpSync(from, dir, { recursive: true });
            await layer.prepare(dir);
          }),
        )
      : findOrBuild(target, initdb);
    templates.set(target, found);
    found.catch(() => templates.delete(target));
  }
  return found;
}

/** Templates of the same layer's earlier versions (the name up to its last `-`), unused for a day. */
function removeStaleLayers(templatesDir: string, name: string): void {
  const family = name.slice(0, name.lastIndexOf('-') + 1);
  for (const other of fs.readdirSync(templatesDir)) {
    if (!other.startsWith(family) || other === name || /\.(lock|building-\d+)$/.test(other)) continue;
    const at = path.join(templatesDir, other);
    try {
      if (Date.now() - fs.statSync(at).mtimeMs > STALE_LAYER_MS) fs.rmSync(at, { recursive: true, force: true });
    } catch {
      /* removed by another process meanwhile */
    }
  }
}

/** The template at `target`, built with `make` by this process when no other is building it. */
async function findOrBuild(target: string, make: (dir: string) => Promise<void>): Promise<string> {
  const templatesDir = path.dirname(target);
  const deadline = performance.now() + TEMPLATE_WAIT_MS;
  fs.mkdirSync(templatesDir, { recursive: true, mode: 0o700 });
  while (!fs.existsSync(target)) {
    // Held by the process building it: once it lets go, the template is there.
    const lock = await waitForLock(`${target}.lock`, deadline - performance.now(), 100);
    try {
      if (!fs.existsSync(target)) await buildInto(target, make);
    } finally {
      lock.release();
    }
  }
  return target;
}

/**
 * Makes `pgdata` when it holds no database: a copy of the template in `templatesDir` (built once;
 * the layer's, when one is given), copied beside it and renamed into place, so a crash mid-copy
 * leaves no half directory.
 */
export async function seedPgdata(pgdata: string, templatesDir: string, layer?: TemplateLayer): Promise<void> {
  if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) return;
  // A folder without PG_VERSION never finished initdb (older code made it in place): made again in place.
  if (fs.existsSync(pgdata) && fs.readdirSync(pgdata).length) return initdb(pgdata);
  fs.rmSync(pgdata, { recursive: true, force: true });
  const copying = `${pgdata}.copying-${process.pid}`;
  fs.rmSync(copying, { recursive: true, force: true });
  const source = await template(templatesDir, layer);
  if (!fs.existsSync(source)) templates.delete(source); // removed since this process found it: build it again
  try {
    const from = await template(templatesDir, layer);
    fs.utimesSync(from, new Date(), new Date()); // in use: not stale (removeStaleLayers)
    fs.cpSync(from, copying, { recursive: true });
    fs.renameSync(copying, pgdata);
  } catch (err) {
    fs.rmSync(copying, { recursive: true, force: true }); // a failed copy leaves nothing behind
    throw err;
  }
}
