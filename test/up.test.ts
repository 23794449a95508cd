/** `make up`'s launcher end to end: prints a URL and key, serves, and leaves nothing behind on SIGTERM. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, freePort } from '../scripts/stack.js';
import { tempDir } from './support/infra.js';
import { processExists } from './support/stack-fixture.js';

/** Pids of processes whose command line mentions `needle`. */
function processesMentioning(needle: string): number[] {
  const found: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(needle)) found.push(Number(d));
    } catch {
      /* exited meanwhile */
    }
  }
  return found;
}

test('when the launcher runs with no NATS_URL, then it prints a working URL and key, and SIGTERM leaves no process or nats-server', async () => {
  const dataDir = tempDir('up');
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', ATS_RUN_MODE: 'tsx', NO_COLOR: '1', SHUTDOWN_TIMEOUT_MS: '5000' };
  delete env.NATS_URL;
  delete env.DATABASE_URL;
  delete env.BOOTSTRAP_API_KEY;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/up.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const banner = new Promise<{ url: string; key: string }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /API:\s+(\S+)/.exec(output)?.[1];
      const key = /API key:\s+(\S+)/.exec(output)?.[1];
      if (url && key) resolve({ url, key });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`launcher exited with ${code}:\n${output}`)));
  });
  try {
    const { url, key } = await banner;
    assert.equal(url, `http://localhost:${port}/api/v1`);
    assert.equal(fs.readFileSync(path.join(dataDir, 'local-api-key'), 'utf8').trim(), key);
    assert.equal((fs.statSync(path.join(dataDir, 'local-api-key')).mode & 0o777).toString(8), '600');

    const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, { headers: { 'X-Service-API-Key': key } });
    assert.equal(res.status, 200, output);
    assert.deepEqual(((await res.json()) as { agents: { name: string }[] }).agents.map((a) => a.name), ['browser-agent', 'browsercode']);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);

    const { groups } = JSON.parse(fs.readFileSync(path.join(dataDir, 'up.pid'), 'utf8')) as { groups: number[] };
    assert.equal(groups.length, 6, 'five services and a nats-server');
    assert.ok(processesMentioning(dataDir).some((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('nats-server')));
    // Every process shares one internal token, kept like the key; the nats-server has its own.
    const secrets = ['internal-token', 'nats/auth.conf'].map((f) => path.join(dataDir, f));
    for (const file of secrets) assert.equal((fs.statSync(file).mode & 0o777).toString(8), '600', file);
    const internalToken = fs.readFileSync(secrets[0]!, 'utf8').trim();
    const natsToken = /token: "([^"]+)"/.exec(fs.readFileSync(secrets[1]!, 'utf8'))?.[1];
    assert.ok(internalToken.length >= 32 && natsToken);
    for (const pid of processesMentioning(dataDir)) {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      assert.ok(!cmdline.includes(internalToken) && !cmdline.includes(natsToken), `a token is on the command line of ${pid}`);
    }

    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, output);
    assert.deepEqual(groups.filter(processExists), [], 'every started process is gone');
    assert.deepEqual(processesMentioning(dataDir), [], 'no orphaned nats-server or service');
    assert.match(output, /Stopped\./);
    assert.ok(!output.includes(`"${key}"`) && output.split(key).length === 3, 'the key appears only in the banner');
    assert.ok(!output.includes(internalToken) && !output.includes(natsToken), 'no token is printed or logged');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
