import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import net from 'node:net';
import { canSandbox, giveTo, insideDisk, listDisk, runShell, shellUser, type ShellOptions } from './shell.js';

let dir: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shell-test-'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function opts(over: Partial<ShellOptions> = {}): ShellOptions & { chunks: string[] } {
  const chunks: string[] = [];
  return { cwd: dir, signal: new AbortController().signal, timeoutMs: 10000, maxOutputBytes: 1 << 20, user: shellUser(), onOutput: (_s, c) => void chunks.push(c), chunks, ...over };
}

describe('a shell command', () => {
  test('when a command writes to stdout and stderr, then both stream out and it runs in the disk directory', async () => {
    await giveTo(dir, shellUser());
    const o = opts();
    const r = await runShell('echo out; echo err >&2; pwd; echo made > made.txt', o);
    assert.equal(r.exitCode, 0);
    assert.match(r.output, /out/);
    assert.match(r.output, /err/);
    assert.match(r.output, new RegExp(dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.equal(o.chunks.join(''), r.output);
    assert.equal(fs.readFileSync(path.join(dir, 'made.txt'), 'utf8'), 'made\n');
  });

  test('when the service holds secrets in its environment, then the command sees none of them', async () => {
    process.env.SECRET_FOR_TEST = 'sk-very-secret';
    try {
      const r = await runShell('env', opts());
      assert.doesNotMatch(r.output, /sk-very-secret|SECRET_FOR_TEST|DATABASE_URL|SIGNING_SECRET|API_KEY/);
      assert.match(r.output, /^PATH=/m);
    } finally {
      delete process.env.SECRET_FOR_TEST;
    }
  });

  test('when the service runs as root, then the command runs as nobody', { skip: process.getuid?.() !== 0 && 'not root' }, async () => {
    const r = await runShell('id -u', opts());
    assert.equal(r.output.trim(), '65534');
  });

  test('when a command outlives its time limit, then it and what it started are killed', async () => {
    const r = await runShell('sleep 30 & echo started; wait', opts({ timeoutMs: 500 }));
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, null);
    assert.match(r.output, /started/);
    const left = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() === 'sleep 30';
      } catch {
        return false;
      }
    });
    assert.deepEqual(left, []);
  });

  test('when a command prints more than the cap, then the output is cut at the cap and marked', async () => {
    const o = opts({ maxOutputBytes: 1000 });
    const r = await runShell('head -c 100000 /dev/zero | tr "\\0" x', o);
    assert.equal(r.exitCode, 0);
    assert.equal(r.truncated, true);
    assert.equal(r.output.length, 1000);
    assert.equal(o.chunks.join('').length, 1000);
  });

  test('when the run is stopped, then the command is killed at once', async () => {
    const ac = new AbortController();
    const running = runShell('sleep 30', opts({ signal: ac.signal }));
    ac.abort();
    const r = await running;
    assert.equal(r.signal, 'SIGKILL');
  });
});

describe('the sandbox of a command', () => {
  const sleepers = (tag: string) =>
    fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() === `sleep ${tag}`;
      } catch {
        return false;
      }
    });

  test('when a command runs sandboxed, then it sees only its own processes, runs as the shell user, and what it leaves behind dies with it', async (t) => {
    if (!(await canSandbox(shellUser(), { network: false }))) return t.skip('unshare is refused on this machine');
    const sandbox = { network: false };
    const r = await runShell('ls /proc | grep -cE "^[0-9]+$"; tr "\\0" " " < /proc/1/cmdline; echo; id -u; pwd; (setsid sleep 4242 > /dev/null 2>&1 &); echo left', opts({ sandbox }));
    const [count, init, uid, cwd, left] = r.output.trim().split('\n');
    assert.ok(Number(count) <= 4, `only its own processes are visible (${count})`);
    assert.match(init!, /^\/bin\/bash -c /, 'PID 1 is the command itself, not the service');
    assert.equal(uid, String(shellUser()?.uid ?? process.getuid?.()));
    assert.equal(cwd, dir);
    assert.equal(left, 'left');
    assert.deepEqual(sleepers('4242'), [], 'a process that left with setsid is gone with the command');
  });

  test('when a command is sandboxed without network, then it cannot reach a port on this host that it reaches with the host network', async (t) => {
    if (!(await canSandbox(shellUser(), { network: false }))) return t.skip('unshare is refused on this machine');
    const server = net.createServer((s) => s.end('hello\n'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const dial = `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`;
      const hostNet = await runShell(dial, opts({ sandbox: { network: true } }));
      assert.equal(hostNet.output.trim(), 'hello');
      const isolated = await runShell(dial, opts({ sandbox: { network: false } }));
      assert.notEqual(isolated.exitCode, 0);
      assert.match(isolated.output, /Network is unreachable/);
    } finally {
      server.close();
    }
  });

  test('when the run was stopped before the command started, then it never starts', async () => {
    const ac = new AbortController();
    ac.abort();
    const r = await runShell('echo ran > ran.txt', opts({ signal: ac.signal }));
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(fs.existsSync(path.join(dir, 'ran.txt')), false);
  });
});

describe('paths on the disk', () => {
  test('when a path leaves the disk, then it is refused; inside it resolves', async () => {
    assert.equal(await insideDisk(dir, 'a/b.txt'), path.join(dir, 'a', 'b.txt'));
    assert.equal(await insideDisk(dir, './c.json'), path.join(dir, 'c.json'));
    await assert.rejects(insideDisk(dir, '../x'), /outside the run's disk/);
    await assert.rejects(insideDisk(dir, '/etc/passwd'), /not a path on the run's disk/);
    fs.symlinkSync('/etc', path.join(dir, 'etc-link'));
    await assert.rejects(insideDisk(dir, 'etc-link/passwd'), /outside the run's disk/);
    await assert.rejects(insideDisk(dir, 'etc-link'), /outside the run's disk/);
  });

  test('when files are listed, then regular files come with sizes, sorted, links left out', async () => {
    fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'sub', 'z.txt'), '12345');
    const listed = await listDisk(dir);
    assert.ok(listed.some((f) => f.path === 'sub/z.txt' && f.sizeBytes === 5));
    assert.ok(!listed.some((f) => f.path.startsWith('etc-link')));
    assert.deepEqual(listed.map((f) => f.path), [...listed.map((f) => f.path)].sort((a, b) => a.localeCompare(b)));
  });
});
