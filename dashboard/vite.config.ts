/**
 * The dashboard's build: content-hashed assets in dist/assets (the gateway caches them for a
 * year), a nonce placeholder on the page's tags (the gateway puts a fresh nonce there for its
 * Content-Security-Policy), and each asset also compressed (.br, .gz) so the gateway sends the
 * smallest form without compressing per request.
 */
import fs from 'node:fs';
import path from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

const NONCE_PLACEHOLDER = 'ATS_CSP_NONCE';

function precompress(): Plugin {
  return {
    name: 'ats-precompress',
    apply: 'build',
    // After the bundle is written: its files are final then (Vite rewrites chunks up to its last
    // generateBundle hook, e.g. the preload list of dynamic imports).
    writeBundle(options, bundle) {
      for (const fileName of Object.keys(bundle)) {
        if (!/\.(js|css|svg)$/.test(fileName)) continue;
        const file = path.join(options.dir!, fileName);
        const bytes = fs.readFileSync(file);
        if (bytes.length < 1024) continue;
        fs.writeFileSync(`${file}.gz`, gzipSync(bytes, { level: 9 }));
        fs.writeFileSync(`${file}.br`, brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
      }
    },
  };
}

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  html: { cspNonce: NONCE_PLACEHOLDER },
  plugins: [precompress()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    manifest: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    // Brotli at its best level takes a second or two; that is the point, not a slow plugin.
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
  server: {
    // `npm run dev -w dashboard` against a running `make up`.
    proxy: { '/api': 'http://localhost:8080' },
  },
});
