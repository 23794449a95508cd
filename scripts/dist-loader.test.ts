/**
 * The hooks `make test` runs TypeScript with once the build is done: a module runs the code tsc
 * compiled for it while that is fresh, its source (through esbuild) once the source is newer or
 * when nothing was compiled, and keeps its source's URL either way.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ROOT } from './stack.js';

const REGISTER = path.join(ROOT, 'scripts', 'dist-register.mjs');

/** Runs `file` with the hooks, `root` standing for the checkout; what it printed. */
function run(root: string, file: string): string {
  const r = spawnSync(process.execPath, ['--import', REGISTER, file], { env: { ...process.env, ATS_SOURCE_ROOT: root }, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test('when a TypeScript module has compiled JavaScript in dist/, then that runs while it is fresh and the source once it is newer, under the source’s URL', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dist-loader-'));
  try {
    const main = path.join(root, 'src', 'main.ts');
    fs.mkdirSync(path.dirname(main), { recursive: true });
    fs.mkdirSync(path.join(root, 'dist', 'src'), { recursive: true });
    // The source imports its sibling as tsc wants it written (./part.js names part.ts).
    fs.writeFileSync(path.join(root, 'src', 'part.ts'), "export const part: string = 'part from source';\n");
    fs.writeFileSync(main, "import { part } from './part.js';\nconst from: string = 'main from source';\nconsole.log([from, part, import.meta.url].join(' | '));\n");
    const past = new Date(Date.now() - 60_000);
    for (const f of ['main.ts', 'part.ts']) fs.utimesSync(path.join(root, 'src', f), past, past);
    fs.writeFileSync(path.join(root, 'dist', 'src', 'main.js'), "import { part } from './part.js';\nconsole.log(['main from dist', part, import.meta.url].join(' | '));\n//# sourceMappingURL=main.js.map\n");

    // main.js is fresh; part.ts was never compiled.
    assert.equal(run(root, main), `main from dist | part from source | ${pathToFileURL(main).href}`);

    fs.utimesSync(main, new Date(), new Date(Date.now() + 60_000));
    assert.equal(run(root, main), `main from source | part from source | ${pathToFileURL(main).href}`, 'a source edited after the build runs as it is now');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
