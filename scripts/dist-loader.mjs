/**
 * Module hooks that run the project's TypeScript from what `make build` compiled: a `.ts` module
 * is given the JavaScript tsc wrote for it in dist/ (the same code) when that is at least as new
 * as the source, and is transformed by esbuild otherwise (a file tsc does not compile, such as
 * the dashboard's, or one edited since the build). The module keeps its source URL, so
 * `import.meta.url` and the paths tests build from it are those of the source.
 *
 * Why: `make test` runs each test file in a Node process of its own, about 140 of them, and
 * loading tsx cost each 0.3–0.6 CPU-s more than these hooks (measured on
 * services/run/src/agents/builtin-model.test.ts: 0.6 CPU-s from dist, 0.7 with these hooks, 1.2
 * with tsx). scripts/test.ts registers them (dist-register.mjs) for the files it starts once the
 * build is done; before, it uses tsx.
 *
 * Plain JavaScript: it is what loads TypeScript.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout (ATS_SOURCE_ROOT for the loader's own test). */
const ROOT = process.env.ATS_SOURCE_ROOT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const TS = /\.m?tsx?$/;
const require = createRequire(import.meta.url);
/** Loaded on first use: most runs never need it. */
let esbuild;

/** The JavaScript of `file`, a TypeScript source: tsc's in dist/ when fresh, else esbuild's. */
function javascriptOf(file) {
  const rel = path.relative(ROOT, file);
  if (file.endsWith('.ts') && !rel.startsWith('..') && !rel.startsWith(`dist${path.sep}`) && !rel.includes(`node_modules${path.sep}`)) {
    const compiled = path.join(DIST, rel.replace(/\.ts$/, '.js'));
    try {
      if (fs.statSync(compiled).mtimeMs >= fs.statSync(file).mtimeMs) {
        // Its source map names dist/, and the module's URL is the source's: the comment is dropped.
        return fs.readFileSync(compiled, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
      }
    } catch {
      /* not compiled: transformed below */
    }
  }
  esbuild ??= require('esbuild');
  return esbuild.transformSync(fs.readFileSync(file, 'utf8'), { loader: file.endsWith('x') ? 'tsx' : 'ts', format: 'esm', target: 'node20', sourcefile: file, sourcemap: 'inline', jsx: 'automatic' }).code;
}

/** `./x.js` written in a TypeScript module names `./x.ts` when that exists (NodeNext style), as tsc and tsx read it. */
export async function resolve(specifier, context, next) {
  if (context.parentURL?.startsWith('file:') && TS.test(context.parentURL) && /^\.{1,2}\//.test(specifier) && /\.m?jsx?$/.test(specifier)) {
    const candidate = new URL(specifier.replace(/\.(m?)js(x?)$/, '.$1ts$2'), context.parentURL);
    if (fs.existsSync(candidate)) return { url: candidate.href, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.startsWith('file:') && TS.test(url)) return { format: 'module', source: javascriptOf(fileURLToPath(url)), shortCircuit: true };
  return next(url, context);
}
