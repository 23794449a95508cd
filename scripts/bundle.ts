/**
 * `make build`'s last step: each service's compiled entry (dist/<entry>.js) and everything it
 * imports, npm packages included, as one ES module beside it (dist/<entry>.bundle.mjs), which
 * `make up` and the test stacks run (scripts/stack.ts) when it is newer than the entry.
 *
 * Why: a service's start was mostly loading modules. Node 20 resolves, reads and compiles each of
 * the files a service imports on its own (650–1,450 per service, esbuild counts); the run service
 * spent 1.2 CPU-s importing them and 0.4 importing its bundle. The code is the same (tsc's output,
 * unchanged), only joined. The cost: the run service and the gateway hold 11–13 MB more at idle
 * (the footprint bench: 1,029 instead of 1,007 MB for the stack with no session).
 *
 * Left outside the bundle: packages that find files beside themselves at run time (PGlite's
 * WebAssembly and data), and the database drivers knex names but never loads here.
 */
import fs from 'node:fs';
import { build } from 'esbuild';
import { bundledEntry, compiledEntry, ENTRY } from './stack.js';

/** Packages read from node_modules at run time. */
const EXTERNAL = [
  '@electric-sql/pglite',
  // knex's drivers other than pg (it requires the configured one only)
  'better-sqlite3',
  'mariadb',
  'mariadb/*',
  'mysql',
  'mysql2',
  'oracledb',
  'sqlite3',
  'tedious',
  'pg-query-stream',
];

async function bundleServices(): Promise<void> {
  await Promise.all(
    Object.values(ENTRY).map((entry) =>
      build({
        entryPoints: [compiledEntry(entry)],
        outfile: bundledEntry(entry),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        external: EXTERNAL,
        // CommonJS packages inside an ES module still call require() for Node's own modules.
        banner: { js: "import { createRequire as __atsCreateRequire } from 'node:module'; const require = __atsCreateRequire(import.meta.url);" },
        logLevel: 'warning',
        legalComments: 'none',
      }),
    ),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const started = Date.now();
  await bundleServices();
  const sizes = Object.entries(ENTRY).map(([service, e]) => `${service} ${(fs.statSync(bundledEntry(e)).size / 1e6).toFixed(1)} MB`);
  process.stdout.write(`bundled ${sizes.join(', ')} in ${Date.now() - started} ms\n`);
}
