/** `make up`'s launcher end to end: prints a URL and key, serves, restarts what crashes, and leaves nothing behind on SIGTERM. */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, canConnect, freePort, killGroup } from '../scripts/stack.js';
import { tempDir } from './support/infra.js';
import { readSse } from './support/sse.js';
import { processExists, stackMode } from './support/stack-fixture.js';
import { until } from './support/until.js';

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

describe('the launcher with no NATS_URL', () => {
  const dataDir = tempDir('up');
  let port: number;
  let child: ChildProcess;
  let output = '';
  let url = '';
  let key = '';
  const seen: (() => void)[] = [];

  /** Resolves once the launcher has printed a line matching `re` (fails after `timeoutMs`). */
  function printed(re: RegExp, timeoutMs = 60000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not printed within ${timeoutMs} ms: ${re}\n${output}`)), timeoutMs);
      const check = () => {
        if (!re.test(output)) return;
        clearTimeout(timer);
        seen.splice(seen.indexOf(check), 1);
        resolve();
      };
      seen.push(check);
      check();
    });
  }
  const groups = () => (JSON.parse(fs.readFileSync(path.join(dataDir, 'up.pid'), 'utf8')) as { groups: number[] }).groups;
  const cmdline = (pid: number) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  };

  before(async () => {
    port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', ATS_RUN_MODE: stackMode(), NO_COLOR: '1', SHUTDOWN_TIMEOUT_MS: '5000' };
    delete env.NATS_URL;
    delete env.DATABASE_URL;
    delete env.BOOTSTRAP_API_KEY;
    child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/up.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const check of [...seen]) check();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`launcher exited with ${code}:\n${output}`))));
    await Promise.race([printed(/API key:\s+(\S+)/, 120000), exited]);
    url = /API:\s+(\S+)/.exec(output)![1]!;
    key = /API key:\s+(\S+)/.exec(output)![1]!;
  });
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    if (fs.existsSync(path.join(dataDir, 'up.pid'))) for (const g of groups()) killGroup(g, 'SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('when it starts, then it prints a working URL and key, and keeps its secrets off command lines', async () => {
    assert.equal(url, `http://localhost:${port}/api/v1`);
    assert.equal(fs.readFileSync(path.join(dataDir, 'local-api-key'), 'utf8').trim(), key);
    assert.equal((fs.statSync(path.join(dataDir, 'local-api-key')).mode & 0o777).toString(8), '600');

    const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, { headers: { 'X-Service-API-Key': key } });
    assert.equal(res.status, 200, output);
    assert.deepEqual(((await res.json()) as { agents: { name: string }[] }).agents.map((a) => a.name), ['browser-agent', 'browsercode']);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    // A browser starts, from the compiled code (dist/ holds no supervisor.pl: it is found beside the source).
    const browser = await fetch(`http://127.0.0.1:${port}/api/v1/browsers`, { method: 'POST', headers: { 'X-Service-API-Key': key, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(browser.status, 201, await browser.clone().text());
    const { id: browserId, status } = (await browser.json()) as { id: string; status: string };
    assert.equal(status, 'active');
    const stopped = await fetch(`http://127.0.0.1:${port}/api/v1/browsers/${browserId}/stop`, { method: 'POST', headers: { 'X-Service-API-Key': key } });
    assert.equal(stopped.status, 200, await stopped.clone().text());
    // The dashboard's address is printed; once built (make build), the gateway serves it there.
    assert.equal(/Dashboard:\s+(\S+)/.exec(output)?.[1], `http://localhost:${port}/`);
    if (fs.existsSync(path.join(ROOT, 'dashboard/dist/index.html'))) {
      const page = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-security-policy') ?? '', /frame-src http:\/\/localhost:\d+/);
    }

    assert.equal(groups().length, 8, 'six services (webhooks among them), the embedded database and a nats-server');
    if (stackMode() === 'dist') {
      // Built by make build, each service runs as one bundle (scripts/bundle.ts).
      const services = groups().map(cmdline).filter((l) => !l.startsWith('nats-server'));
      assert.equal(services.filter((l) => /\/dist\/.*\/main\.bundle\.mjs\0/.test(l)).length, 7, services.join('\n'));
    }
    assert.ok(processesMentioning(dataDir).some((pid) => cmdline(pid).startsWith('nats-server')));
    // Every process shares one internal token, kept like the key; the nats-server and the database have their own.
    const secrets = ['internal-token', 'nats/auth.conf', 'database/password'].map((f) => path.join(dataDir, f));
    for (const file of secrets) assert.equal((fs.statSync(file).mode & 0o777).toString(8), '600', file);
    assert.equal((fs.statSync(path.join(dataDir, 'database')).mode & 0o777).toString(8), '700', 'only this user reaches the database socket');
    const internalToken = fs.readFileSync(secrets[0]!, 'utf8').trim();
    const natsToken = /token: "([^"]+)"/.exec(fs.readFileSync(secrets[1]!, 'utf8'))?.[1];
    const databasePassword = fs.readFileSync(secrets[2]!, 'utf8').trim();
    assert.ok(internalToken.length >= 32 && natsToken && databasePassword.length >= 32);
    for (const pid of processesMentioning(dataDir)) {
      const line = cmdline(pid);
      for (const secret of [internalToken, natsToken, databasePassword, encodeURIComponent(databasePassword)]) assert.ok(!line.includes(secret), `a secret is on the command line of ${pid}`);
    }
  });

  test('when a service, the database and the nats-server are killed, then each is restarted, the restart logged, and the stack serves runs again', async () => {
    const before = groups();
    const run = before.find((pid) => cmdline(pid).includes('services/run/src/main'))!;
    const nats = before.find((pid) => cmdline(pid).startsWith('nats-server'))!;
    const database = before.find((pid) => cmdline(pid).includes('services/database/src/main'))!;
    assert.ok(run && nats && database, 'the run service, the nats-server and the database are running');
    const natsPort = Number(/-p\0(\d+)/.exec(cmdline(nats))?.[1]);
    killGroup(run, 'SIGKILL');
    killGroup(nats, 'SIGKILL');
    killGroup(database, 'SIGKILL');
    await printed(/run\s+\| exited \(code null, signal SIGKILL\); restart #1 in 1 s/);
    await printed(/nats\s+\| exited \(code null, signal SIGKILL\); restart #1 in 1 s/);
    await printed(/database\s+\| exited \(code null, signal SIGKILL\); restart #1 in 1 s/);
    await printed(/nats\s+\| restarted/);
    await printed(/database\s+\| restarted/);
    await printed(/run\s+\| restarted/);

    // A service restarted before the nats-server is back may exit again; the launcher keeps restarting it until all are healthy.
    await until(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status, () => 0)) === 200, { timeoutMs: 60000, intervalMs: 200, what: 'a healthy stack' });
    const now = groups();
    const newRun = now.find((pid) => cmdline(pid).includes('services/run/src/main'));
    const newNats = now.find((pid) => cmdline(pid).startsWith('nats-server'));
    assert.ok(newRun && newRun !== run && processExists(newRun), 'a new run service');
    assert.ok(newNats && newNats !== nats && processExists(newNats), 'a new nats-server');
    assert.ok(await canConnect('127.0.0.1', natsPort), 'on the port the services know');
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200, output);

    // A run goes through the restarted run service (its events over the restarted NATS).
    const created = await fetch(`http://127.0.0.1:${port}/api/v1/agents/browsercode/runs`, {
      method: 'POST',
      headers: { 'X-Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'Run `echo back again`.', model: 'builtin' }),
    });
    assert.equal(created.status, 202, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    const events = await fetch(`http://127.0.0.1:${port}/api/v1/agents/browsercode/runs/${id}/events/stream`, { headers: { 'X-Service-API-Key': key } });
    const seenEvents = await readSse(events);
    assert.equal(seenEvents.at(-1)?.event, 'run.completed', JSON.stringify(seenEvents));
  });

  test('when it gets SIGTERM, then it leaves no process or nats-server and printed no secret', async () => {
    const started = groups();
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, output);
    assert.deepEqual(started.filter(processExists), [], 'every started process is gone');
    assert.deepEqual(processesMentioning(dataDir), [], 'no orphaned nats-server or service');
    assert.match(output, /Stopped\./);
    assert.ok(!output.includes(`"${key}"`) && output.split(key).length === 3, 'the key appears only in the banner');
    const internalToken = fs.readFileSync(path.join(dataDir, 'internal-token'), 'utf8').trim();
    const natsToken = /token: "([^"]+)"/.exec(fs.readFileSync(path.join(dataDir, 'nats/auth.conf'), 'utf8'))![1]!;
    const databasePassword = fs.readFileSync(path.join(dataDir, 'database/password'), 'utf8').trim();
    for (const secret of [internalToken, natsToken, databasePassword, encodeURIComponent(databasePassword)]) assert.ok(!output.includes(secret), 'no token or password is printed or logged');
  });
});
