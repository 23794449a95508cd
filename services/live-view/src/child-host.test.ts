import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ChildHost } from './child-host.js';

const host = new ChildHost();
after(() => host.close());

test('when a child is fed through the host, then it gets every byte in order and its output and exit come back', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'host-'));
  try {
    const pidFile = path.join(dir, 'cat.pid');
    const child = host.spawn('cat', [], { stdin: true, stdout: true, pidFile });
    const pid = await child.started;
    assert.ok(pid && pid > 0);
    assert.equal(fs.readFileSync(pidFile, 'utf8'), String(pid), 'the pid is kept beside it while it runs');
    const chunks = Array.from({ length: 50 }, (_, i) => Buffer.from(`chunk ${i};`));
    for (const c of chunks) child.write(c);
    child.end();
    const exit = await child.exited;
    assert.equal(exit.code, 0);
    assert.equal(exit.stdout!.toString(), Buffer.concat(chunks).toString());
    assert.equal(child.pendingBytes, 0);
    assert.equal(fs.existsSync(pidFile), false, 'the pid file goes with it');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('when a child cannot start or is killed, then its exit says so', async () => {
  const missing = await host.spawn('/nonexistent/ffmpeg', []).exited;
  assert.match(missing.error ?? '', /ENOENT/);
  const sleeper = host.spawn('sleep', ['30'], { stdin: true });
  await sleeper.started;
  sleeper.kill('SIGKILL');
  assert.equal((await sleeper.exited).signal, 'SIGKILL');
  assert.equal(host.running, 0);
});
