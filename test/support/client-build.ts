/**
 * The TypeScript client package's dist/ — what `ats` (bin/ats.js) and `ats mcp` run — built
 * when any of its sources is newer (`make build` builds it too; a test run alone may not have).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CLIENT_DIR = path.join(ROOT, 'clients/typescript');

function mtimes(dir: string, ext: string): number[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext) && !e.name.endsWith('.d.ts'))
    .map((e) => fs.statSync(path.join(e.parentPath, e.name)).mtimeMs);
}

/** Compiles the package unless its dist/ is at least as new as every source. */
export async function buildClientPackage(): Promise<void> {
  const sources = [...mtimes(path.join(CLIENT_DIR, 'src'), '.ts'), fs.statSync(path.join(CLIENT_DIR, 'tsconfig.json')).mtimeMs];
  const built = mtimes(path.join(CLIENT_DIR, 'dist'), '.js');
  if (built.length && Math.min(...built) >= Math.max(...sources)) return;
  await promisify(execFile)(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(CLIENT_DIR, 'tsconfig.json')], { cwd: ROOT });
}
