import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { LockHeldError, acquireLock, waitForLock } from './lock-file.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'ats-lock-'));

test('when a live process holds the lock, then a second acquire fails naming its pid', () => {
  const file = path.join(tmp(), '.lock');
  fs.writeFileSync(file, String(process.ppid)); // the test runner: alive, and not us
  assert.throws(() => acquireLock(file), (err: unknown) => err instanceof LockHeldError && err.pid === process.ppid);
});

test('when another process holds the lock, then waitForLock takes it once that process is gone, and gives up with LockHeldError after its time', async () => {
  const file = path.join(tmp(), '.lock');
  fs.writeFileSync(file, String(process.ppid)); // the test runner: alive for the whole test
  await assert.rejects(waitForLock(file, 100, 10), (err: unknown) => err instanceof LockHeldError && err.pid === process.ppid);

  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  fs.writeFileSync(file, String(holder.pid));
  const waiting = waitForLock(file, 30_000, 10);
  holder.kill('SIGKILL');
  const lock = await waiting;
  assert.equal(fs.readFileSync(file, 'utf8'), String(process.pid));
  lock.release();
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

test('when processes race for one lock, then only one holds it at a time (a lock being made is never taken as stale)', async () => {
  const dir = tmp();
  const file = path.join(dir, '.lock');
  const inside = path.join(dir, 'inside');
  const lockModule = new URL('./lock-file.ts', import.meta.url).href;
  const ready = path.join(dir, 'ready');
  fs.mkdirSync(ready);
  // The children start together (each waits until all six are loaded), then each takes the lock again and again for
  // half a second and until it has held it 25 times (a loaded machine runs them slowly: the count, not only a clock,
  // decides how much they race; 20 s bounds it). While a child holds the lock, it alone may hold `inside`.
  const child = `
    import fs from 'node:fs';
    const { acquireLock, LockHeldError } = await import(${JSON.stringify(lockModule)});
    fs.writeFileSync(${JSON.stringify(ready)} + '/' + process.pid, '');
    const start = Date.now();
    const nap = new Int32Array(new SharedArrayBuffer(4));
    while (fs.readdirSync(${JSON.stringify(ready)}).length < 6 && Date.now() < start + 60000) Atomics.wait(nap, 0, 0, 5); // no spinning while the others load
    let held = 0, both = 0;
    const least = Date.now() + 500, most = Date.now() + 20000;
    while ((held < 25 || Date.now() < least) && Date.now() < most) {
      let lock;
      try { lock = acquireLock(${JSON.stringify(file)}); } catch (err) { if (err instanceof LockHeldError) continue; throw err; }
      held++;
      try { fs.writeFileSync(${JSON.stringify(inside)}, '', { flag: 'wx' }); fs.rmSync(${JSON.stringify(inside)}); } catch { both++; }
      lock.release();
    }
    process.stdout.write(JSON.stringify({ held, both }));
  `;
  const { spawn } = await import('node:child_process');
  const results = await Promise.all(
    Array.from({ length: 6 }, () => {
      const c = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      c.stdout.on('data', (d: Buffer) => (out += d));
      return new Promise<{ held: number; both: number }>((resolve, reject) => c.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}`)))));
    }),
  );
  assert.ok(results.reduce((n, r) => n + r.held, 0) > 100, `the lock was taken often enough to race: ${JSON.stringify(results)}`);
  assert.deepEqual(results.map((r) => r.both), results.map(() => 0), 'no two processes held the lock at once');
});
