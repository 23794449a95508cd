import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { LockHeldError, acquireLock } from './lock-file.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'ats-lock-'));

test('when a live process holds the lock, then a second acquire fails naming its pid', () => {
  const file = path.join(tmp(), '.lock');
  fs.writeFileSync(file, String(process.ppid)); // the test runner: alive, and not us
  assert.throws(() => acquireLock(file), (err: unknown) => err instanceof LockHeldError && err.pid === process.ppid);
});

test('when the holder died, then the stale lock is taken over and released cleanly', () => {
  const file = path.join(tmp(), '.lock');
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
  fs.writeFileSync(file, dead);
  const lock = acquireLock(file);
  assert.equal(fs.readFileSync(file, 'utf8'), String(process.pid));
  lock.release();
  lock.release();
  assert.equal(fs.existsSync(file), false);
});
