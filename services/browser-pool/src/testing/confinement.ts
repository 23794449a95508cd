/** The confinement this host allows, probed once per test process (what the pool would use here). */
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { createLogger } from '../../../common/src/logger.js';
import { detectConfinement, type BrowserConfinement } from '../confinement.js';

let cached: BrowserConfinement | undefined;

export function hostConfinement(): BrowserConfinement {
  if (!cached) {
    const policyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-policy-'));
    process.once('exit', () => fs.rmSync(policyDir, { recursive: true, force: true }));
    cached = detectConfinement({ mode: 'auto', uidBase: 210000, noSandbox: undefined, policyDir }, createLogger('test', 'silent'));
  }
  return cached;
}
