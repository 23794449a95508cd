/**
 * What loading TypeScript costs a test runner: the same unit test files run with tsx (before) and
 * with scripts/dist-loader.mjs on what `make build` compiled (after), alternating file by file so
 * both meet the same load. CPU of each runner with its children, from GNU time.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../scripts/stack.js';

/** Pure-code unit files of several sizes (no browser, no database), so the loading is most of what they cost. */
const FILES = [
  'services/common/src/config.test.ts',
  'services/run/src/agents/builtin-model.test.ts',
  'gateway/src/validation.test.ts',
  'services/run/src/agents/page-content.test.ts',
  'gateway/src/json-schema.test.ts',
];

export interface TestLoaderFigures {
  files: number;
  rounds: number;
  /** Mean CPU-s of one file's runner. */
  tsxCpuS: number;
  distCpuS: number;
  /** after/before */
  ratio: number;
}

/** CPU seconds (user + system, children included) of one `node --import <hooks> --test file`. */
function cpuOf(hooks: string, file: string): number {
  const out = path.join(os.tmpdir(), `bench-loader-${process.pid}.txt`);
  try {
    const r = spawnSync('/usr/bin/time', ['-o', out, '-f', '%U %S', process.execPath, '--import', hooks, '--test', file], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) throw new Error(`${file} failed with ${hooks}:\n${r.stdout}\n${r.stderr}`);
    const [u, s] = fs.readFileSync(out, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
    return u! + s!;
  } finally {
    fs.rmSync(out, { force: true });
  }
}

export function testLoaderBench(o: { rounds: number }): TestLoaderFigures {
  const files = FILES.filter((f) => fs.existsSync(path.join(ROOT, f)));
  const register = path.join(ROOT, 'scripts', 'dist-register.mjs');
  let tsx = 0;
  let dist = 0;
  for (let r = 0; r < o.rounds; r++) {
    for (const f of files) {
      // Alternating which goes first, so neither always meets a cache the other warmed.
      if (r % 2) {
        dist += cpuOf(register, f);
        tsx += cpuOf('tsx', f);
      } else {
        tsx += cpuOf('tsx', f);
        dist += cpuOf(register, f);
      }
    }
  }
  const n = files.length * o.rounds;
  return { files: files.length, rounds: o.rounds, tsxCpuS: tsx / n, distCpuS: dist / n, ratio: dist / tsx };
}
