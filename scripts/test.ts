/**
 * Runs the tests with Node's built-in runner: unit tests beside the code, then integration
 * tests in test/. `unit` or `integration` runs one group. Exits non-zero on any failure.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './stack.js';

function find(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name === 'data' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) find(p, out);
    else if (e.name.endsWith('.test.ts')) out.push(path.relative(ROOT, p));
  }
  return out;
}

const which = process.argv[2];
const unit = ['services', 'gateway', 'scripts', 'dashboard'].flatMap((d) => find(path.join(ROOT, d))).sort();
const integration = find(path.join(ROOT, 'test')).sort();
/**
 * Unit test files run two at a time (each starts at most one small stack of its own: a PGlite, a
 * server on port 0, a Chromium); integration files one at a time, each a whole stack of processes.
 */
const groups: [string, string[], number][] = [];
if (which !== 'integration') groups.push(['unit', unit, 2]);
if (which !== 'unit') groups.push(['integration', integration, 1]);

let failed = false;
for (const [name, files, concurrency] of groups) {
  if (!files.length) continue;
  process.stdout.write(`\n== ${name} tests (${files.length} files)\n`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
