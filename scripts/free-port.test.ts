/**
 * freePort across processes: two test files side by side each start a stack, and neither may pick
 * a port the other picked and has not bound yet.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import { freePort, PORT_LOCKS, ROOT } from './stack.js';

const PICKS = 400;

/** Another process picking `n` ports at once with this one; resolves to its ports once it has exited. */
function picksInAnotherProcess(n: number): Promise<number[]> {
  const code = `import { freePort } from './scripts/stack.ts'; const ports = []; for (let i = 0; i < ${n}; i++) ports.push(await freePort()); console.log(JSON.stringify(ports));`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b));
  return new Promise((resolve, reject) => child.on('close', (c) => (c === 0 ? resolve(JSON.parse(out) as number[]) : reject(new Error(`exited ${c}`)))));
}

test('when two processes pick free ports at the same time, then no port goes to both; a process that ended leaves its ports to others', async () => {
  const theirs = picksInAnotherProcess(PICKS);
  const mine: number[] = [];
  for (let i = 0; i < PICKS; i++) mine.push(await freePort());
  const other = await theirs;
  assert.equal(new Set(other).size, PICKS);
  // Without a reservation shared by the processes, 400 random picks each from 12,000 ports share about 13.
  assert.deepEqual(mine.filter((p) => other.includes(p)), [], 'no port picked by both');
  const held = new Set(fs.readdirSync(PORT_LOCKS).map(Number));
  assert.ok(mine.every((p) => held.has(p)), 'this process still holds its ports');
  assert.deepEqual(other.filter((p) => held.has(p)), [], "the ended process's ports are free again");
});
