/**
 * `make build`'s last step: each service's compiled entry (dist/<entry>.js) and everything it
 * imports, npm packages included, as one ES module beside it (dist/<entry>.bundle.mjs), which
 * `make up` and the test stacks run (scripts/stack.ts) when it is newer than the entry.
 *
 * Why: a service's start was mostly loading modules. Node 20 resolves, reads and compiles each of
 * the files a service imports on its own (650–1,450 per service, esbuild counts); the run service
 * spent 1.2 CPU-s importing them and 0.4 importing its bundle. The code is the same (tsc's output,
 * unchanged), only joined.
 *
 * Left outside the bundle: packages that find files beside themselves at run time (PGlite's
 * WebAssembly and data), and the database drivers knex names but never loads here.
 *
 * Kept small in memory, because V8 holds a module's whole source for as long as the process runs
 * (to compile functions lazily): comments and indentation are dropped (names are kept, so stack
 * traces still read), what a service imports with `import()` (unpdf, for PDFs only) is a chunk of
 * its own loaded when first used, and the text is Latin-1 only: one character above U+00FF (an
 * em dash in a comment, a curly quote in a regular expression) makes V8 store the whole source
 * two bytes per character. Measured on an idle stack, the run service held 68 MB PSS before and
 * 44 after, the gateway 48 and 33, file-storage, live-view and webhooks 96 and 78.
 */
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { bundledEntry, compiledEntry, ENTRY } from './stack.js';

/** The folder beside each bundle that holds its lazily loaded chunks. */
export const CHUNKS = 'bundle-chunks';

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

/**
 * `code` with every character above U+00FF written as a \u escape. esbuild escapes them in
 * strings and identifiers but leaves regular expression literals as they are; there `\u2019`
 * (or a surrogate pair's two escapes, with or without the `u` flag) means the same character.
 * An escaped one (`\’`) loses its backslash: `\u2019` is that character already.
 */
export function latin1Source(code: string): string {
  return code.replace(/(\\*)([^\u0000-\u00ff])/g, (_, slashes: string, c: string) => {
    const escaped = c.charCodeAt(0).toString(16).padStart(4, '0');
    return `${slashes.length % 2 ? slashes.slice(1) : slashes}\\u${escaped}`;
  });
}

/**
 * Bundles one compiled entry into `outfile` (an ES module), with the modules it imports by
 * `import()` as chunks in CHUNKS beside it, Latin-1 only.
 */
export async function bundle(entry: string, outfile: string): Promise<void> {
  const outdir = path.dirname(outfile);
  const result = await build({
    entryPoints: { [path.basename(outfile, '.mjs')]: entry },
    outdir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    chunkNames: `${CHUNKS}/[name]-[hash]`,
    write: false,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: EXTERNAL,
    minifyWhitespace: true,
    // CommonJS packages inside an ES module still call require() for Node's own modules.
    banner: { js: "import { createRequire as __atsCreateRequire } from 'node:module'; const require = __atsCreateRequire(import.meta.url);" },
    logLevel: 'warning',
    legalComments: 'none',
  });
  fs.rmSync(path.join(outdir, CHUNKS), { recursive: true, force: true });
  // Chunks first: a bundle newer than its entry is run (scripts/stack.ts), so it is written last.
  const files = result.outputFiles.sort((a, b) => Number(a.path === outfile) - Number(b.path === outfile));
  for (const f of files) {
    fs.mkdirSync(path.dirname(f.path), { recursive: true });
    fs.writeFileSync(f.path, latin1Source(f.text));
  }
}

async function bundleServices(): Promise<void> {
  await Promise.all(Object.values(ENTRY).map((entry) => bundle(compiledEntry(entry), bundledEntry(entry))));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const started = Date.now();
  await bundleServices();
  const sizes = Object.entries(ENTRY).map(([service, e]) => `${service} ${(fs.statSync(bundledEntry(e)).size / 1e6).toFixed(1)} MB`);
  process.stdout.write(`bundled ${sizes.join(', ')} in ${Date.now() - started} ms\n`);
}
