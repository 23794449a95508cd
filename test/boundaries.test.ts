/**
 * The seams between services are kept by a test (STYLE habit 13): no file of one service (or of
 * the gateway) imports another service's source. What may cross is the shared code in
 * services/common, the generated contracts in gen/, and a service's own `src/client/` module —
 * the helpers it offers its callers.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The part of the tree a path belongs to: a service's name, `gateway`, or undefined (gen/, test/, scripts/ …). */
function ownerOf(rel: string): string | undefined {
  const parts = rel.split('/');
  if (parts[0] === 'gateway') return 'gateway';
  if (parts[0] === 'services' && parts[1]) return parts[1];
  return undefined;
}

/** Why `from` may not import `to` (paths relative to the root), or undefined when it may. */
function refusal(from: string, to: string): string | undefined {
  const a = ownerOf(from);
  const b = ownerOf(to);
  if (!a || !b || a === b) return undefined;
  if (a === 'common') return `services/common is shared by every service and imports none (${b})`;
  if (b === 'common') return undefined;
  if (b !== 'gateway' && to.startsWith(`services/${b}/src/client/`)) return undefined;
  return `${a} imports ${b}'s source; use ${b}'s src/client/ module, services/common or gen/`;
}

/** Every import that crosses a seam it may not, in `files` (path relative to the root → source text). */
export function crossings(files: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [rel, text] of files) {
    for (const { fileName: spec } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!spec.startsWith('.')) continue; // a package
      const to = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
      const why = refusal(rel, to);
      if (why) out.push(`${rel}: '${spec}': ${why}`);
    }
  }
  return out;
}

/** The .ts files under services/ and gateway/, path relative to the root → text. */
function sources(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.')) continue;
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.ts')) files.set(rel, fs.readFileSync(path.join(ROOT, rel), 'utf8'));
    }
  };
  walk('services');
  walk('gateway');
  return files;
}

describe('service boundaries', () => {
  test('when the tree is scanned, then no file imports another service’s source outside its client/ module', () => {
    const files = sources();
    assert.ok(files.size > 50, `scanned ${files.size} files`);
    assert.deepEqual(crossings(files), []);
  });

  test('when a file imports another service’s source, then the scan names it; client/, common and gen/ pass', () => {
    const planted = new Map([
      ['services/run/src/run-worker.ts', ["import { a } from '../../file-storage/src/file-storage.js';", "import { b } from '../../file-storage/src/client/disk-sync.js';", "import { c } from '../../common/src/errors.js';", "import { d } from '../../../gen/ats/run/v1/run.js';"].join('\n')],
      ['gateway/src/app.ts', ["const m = await import('../../services/run/src/runs.js');", "import type { X } from '../../services/common/src/grpc.js';"].join('\n')],
      ['services/live-view/src/recorder.ts', "export { y } from '../../browser-pool/src/browser-pool.js';"],
      ['services/common/src/grpc.ts', "import '../../run/src/client/x.js';"],
      ['services/browser-pool/src/pool.ts', "import { own } from './client/own.js';\nimport { z } from 'express';"],
    ]);
    const found = crossings(planted);
    assert.deepEqual(
      found.map((f) => f.split(': ').slice(0, 2).join(': ')),
      [
        "services/run/src/run-worker.ts: '../../file-storage/src/file-storage.js'",
        "gateway/src/app.ts: '../../services/run/src/runs.js'",
        "services/live-view/src/recorder.ts: '../../browser-pool/src/browser-pool.js'",
        "services/common/src/grpc.ts: '../../run/src/client/x.js'",
      ],
    );
  });
});
