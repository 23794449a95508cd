import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import net from 'node:net';
import { createLogger } from '../../../common/src/logger.js';
import { canSandbox, giveTo, insideDisk, listDisk, runShell, shellUser, type ShellOptions } from './shell.js';
import { defaultSlots, ShellTenancy, type Tenant } from './shell-tenancy.js';
import { seccompFilter } from './seccomp.js';

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

  test('when a command prints characters split across reads, NUL and bytes that are not UTF-8, then the text is whole and the rest is kept or marked', async () => {
    const o = opts();
    // "é" (c3 a9) with a pause between its two bytes, so they arrive in two reads.
    const r = await runShell("printf 'caf\\303'; sleep 0.2; printf '\\251 a\\000b\\377c'", o);
    assert.equal(r.exitCode, 0);
    assert.equal(r.output, 'café a\u0000b\ufffdc');
    assert.equal(o.chunks.join(''), r.output);
  });

  test('when the run is stopped, then the command is killed at once', async () => {
    const ac = new AbortController();
    const running = runShell('sleep 30', opts({ signal: ac.signal }));
    ac.abort();
    const r = await running;
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(r.timedOut, false, 'the stop killed it, not its timeout');
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

test('when run services on one host start with different TMPDIRs (make test beside make up), then they share one registry of the uid range, so neither reaps the other’s commands', () => {
  const was = process.env.TMPDIR;
  try {
    const seen = ['/dev/shm', os.tmpdir(), path.join(os.tmpdir(), 'elsewhere')].map((dir) => {
      process.env.TMPDIR = dir;
      return defaultSlots(170000);
    });
    assert.deepEqual(new Set(seen).size, 1, seen.join(' '));
    assert.equal(seen[0], `/tmp/ats-shell-slots-${process.getuid?.() ?? 0}-170000`);
  } finally {
    if (was === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = was;
  }
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

describe('the confinement of a run', () => {
  const root = process.getuid?.() === 0;
  const caps = { maxProcesses: 64, maxMemoryMb: 256, maxCpuPercent: 100, maxDiskMb: 20, tmpMb: 8 };
  let work: string;
  let tenancy: ShellTenancy;
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'shell-work-'));
    fs.chmodSync(work, 0o711);
    const logger = createLogger('shell-test', 'silent');
    tenancy = await ShellTenancy.open({ workDir: work, uidBase: 170000, uidCount: 8, caps, cgroups: 'auto', logger, slotsDir: path.join(work, '.slots') });
  });
  after(() => fs.rmSync(work, { recursive: true, force: true }));

  /** Runs `command` as the tenant's command, in the full sandbox. */
  const run = async (t: Tenant, command: string, over: Partial<ShellOptions> = {}) => {
    fs.mkdirSync(t.dir, { recursive: true });
    await giveTo(t.dir, t.user ?? shellUser());
    return runShell(command, opts({ cwd: t.dir, user: t.user ?? shellUser(), sandbox: { network: false, hide: [work] }, caps, cgroups: t.cgroups, scratchDir: t.scratchDir, ...over }));
  };

  test('when two runs work side by side, then neither reads, lists nor writes the other\'s disk', async () => {
    const a = await tenancy.acquire('run_alpha1');
    const b = await tenancy.acquire('run_beta1');
    try {
      assert.equal((await run(a, 'echo alpha-secret > secret.txt')).exitCode, 0);
      const peek = await run(b, `cat ${a.dir}/secret.txt; ls ${a.dir}; echo x > ${a.dir}/planted.txt; id -u`);
      assert.doesNotMatch(peek.output, /alpha-secret/);
      assert.equal(fs.existsSync(path.join(a.dir, 'planted.txt')), false);
      if (root) assert.notEqual(a.user!.uid, b.user!.uid, 'each run has its own uid');
    } finally {
      await a.release();
      await b.release();
    }
  });

  test('when a host Unix socket listens under /tmp, /run or elsewhere, then a command cannot connect to it', async () => {
    const servers: net.Server[] = [];
    const places = [fs.mkdtempSync(path.join(os.tmpdir(), 'sock-')), '/run', fs.mkdtempSync('/var/lib/ats-sock-')];
    const socks = places.map((d) => path.join(d, `ats-test-${process.pid}.sock`));
    const t = await tenancy.acquire('run_sockets1');
    try {
      for (const s of socks) {
        const server = net.createServer((c) => c.end('hello from the host\n'));
        await new Promise<void>((r) => server.listen(s, r));
        fs.chmodSync(s, 0o777);
        fs.chmodSync(path.dirname(s), 0o755);
        servers.push(server);
      }
      const dial = (s: string) => `perl -MIO::Socket::UNIX -e '$c = IO::Socket::UNIX->new(Peer => "${s}") or die "connect: $!\\n"; print <$c>'`;
      // Without the sandbox the sockets are reachable: the test would see a leak.
      const open = await runShell(dial(socks[0]!), opts({ user: t.user ?? shellUser() }));
      assert.match(open.output, /hello from the host/);
      for (const s of socks) {
        const r = await run(t, dial(s));
        assert.notEqual(r.exitCode, 0, `${s} is out of reach`);
        assert.doesNotMatch(r.output, /hello from the host/);
      }
      if (fs.existsSync('/var/run/postgresql')) {
        const r = await run(t, 'ls -A /var/run/postgresql; psql -h /var/run/postgresql -U postgres -c "select 1"');
        assert.notEqual(r.exitCode, 0);
        assert.doesNotMatch(r.output, /\(1 row\)/);
      }
    } finally {
      for (const s of servers) s.close();
      await t.release();
      fs.rmSync(places[0]!, { recursive: true, force: true });
      fs.rmSync(places[2]!, { recursive: true, force: true });
    }
  });

  test('when a command leaves files in /tmp and /dev/shm, then the next command finds none and the host never had them', async () => {
    const t = await tenancy.acquire('run_scratch1');
    const tag = `left-${process.pid}`;
    try {
      const first = await run(t, `echo x > /tmp/${tag} && echo y > /dev/shm/${tag} && ls /tmp/${tag} /dev/shm/${tag}`);
      assert.equal(first.exitCode, 0, first.output);
      const second = await run(t, `ls /tmp/${tag} /dev/shm/${tag}`);
      assert.notEqual(second.exitCode, 0);
      assert.match(second.output, /No such file or directory/);
      assert.equal(fs.existsSync(`/tmp/${tag}`), false);
      assert.equal(fs.existsSync(`/dev/shm/${tag}`), false);
      const full = await run(t, 'head -c 20m /dev/zero > /tmp/fill');
      assert.match(full.output, /No space left on device/, '/tmp is size-capped');
    } finally {
      await t.release();
    }
  });

  test('when a command starts 3,000 processes, then forks beyond the cap fail and the next command runs', async () => {
    const t = await tenancy.acquire('run_forks1');
    try {
      const bomb = await run(t, `perl -e 'for my $i (1..3000) { my $p = fork; if (!defined $p) { print "fork failed after $i: $!\\n"; exit 1 } if (!$p) { sleep 60; exit } } print "started 3000\\n"'`);
      assert.equal(bomb.exitCode, 1, bomb.output);
      const [, n] = /fork failed after (\d+): Resource temporarily unavailable/.exec(bomb.output) ?? [];
      assert.ok(Number(n) <= caps.maxProcesses, `refused at ${n}`);
      const next = await run(t, 'echo still here');
      assert.equal(next.output.trim(), 'still here');
    } finally {
      await t.release();
    }
  });

  test('when a command writes past the disk quota, in one file or many, then it is stopped and the result says so', async () => {
    const t = await tenancy.acquire('run_disk1');
    try {
      const one = await run(t, 'head -c 2G /dev/zero > big.bin');
      assert.ok(one.diskExceeded !== undefined && one.diskExceeded > caps.maxDiskMb * 1024 * 1024, `stopped past the quota (${one.diskExceeded})`);
      assert.ok(fs.statSync(path.join(t.dir, 'big.bin')).size <= caps.maxDiskMb * 1024 * 1024 + 1024, 'no file grows past the quota');
      fs.rmSync(path.join(t.dir, 'big.bin'));
      const many = await run(t, 'for i in $(seq 200); do head -c 1m /dev/zero > f$i; done; echo wrote all');
      assert.ok(many.diskExceeded !== undefined, 'many small files are counted too');
      assert.doesNotMatch(many.output, /wrote all/);
    } finally {
      await t.release();
    }
  });

  test('when a command uses memory beyond the cap, then it is refused or killed; the limits are those configured', async () => {
    const t = await tenancy.acquire('run_memory1');
    try {
      const hog = await run(t, `perl -e '$x = "x" x (400 * 1024 * 1024); print "allocated\\n"'`);
      assert.notEqual(hog.exitCode, 0);
      assert.doesNotMatch(hog.output, /allocated/);
      const seen = await run(t, 'ulimit -u; ulimit -f; cat /proc/self/cgroup');
      const [nproc, fsize] = seen.output.split('\n');
      assert.equal(nproc, String(caps.maxProcesses));
      assert.equal(Number(fsize) * 1024, Math.ceil((caps.maxDiskMb * 1024 * 1024 + 1) / 1024) * 1024);
      if (t.cgroups.length) assert.match(seen.output, new RegExp(`ats-shell/u${t.user!.uid}`));
    } finally {
      await t.release();
    }
  });

  test('when a run ends, then what it left running is killed and its work folder removed; a dead owner\'s slot is reaped at start', async () => {
    const t = await tenancy.acquire('run_leftover1');
    await run(t, '(setsid sleep 4343 > /dev/null 2>&1 &); echo ok');
    await t.release();
    assert.equal(fs.existsSync(t.dir), false);
    // A slot whose owner died (a pid that is not the recorded process) is reaped; a live owner's is not.
    const dead = path.join(work, '.slots', '5');
    fs.mkdirSync(dead, { recursive: true });
    fs.mkdirSync(path.join(work, 'run_dead1'));
    fs.writeFileSync(path.join(dead, 'owner.json'), JSON.stringify({ pid: process.pid, start: 1, runId: 'run_dead1', dir: path.join(work, 'run_dead1') }));
    const live = await tenancy.acquire('run_live1');
    fs.mkdirSync(live.dir);
    const reaped = await tenancy.reap(async () => 'unknown');
    assert.equal(reaped.slots, 1);
    assert.equal(fs.existsSync(path.join(work, 'run_dead1')), false);
    assert.equal(fs.existsSync(live.dir), true);
    await live.release();
  });

  test('when another run service on this host starts and reaps while runs take slots and run commands, then no command of a live run is killed', async () => {
    // The other service shares the slot registry (the same uid range), as stacks side by side do.
    const otherWork = fs.mkdtempSync(path.join(os.tmpdir(), 'shell-work-other-'));
    const other = await ShellTenancy.open({ workDir: otherWork, uidBase: 170000, uidCount: 8, caps, cgroups: 'auto', logger: createLogger('other', 'silent'), slotsDir: path.join(work, '.slots') });
    let running = true;
    const reaps = (async () => {
      let n = 0;
      for (; running || n < 3; n++) await other.reap(async () => 'unknown');
      return n;
    })();
    try {
      const results = await Promise.all(
        Array.from({ length: 4 }, async (_, i) => {
          const out: string[] = [];
          for (let round = 0; round < 4; round++) {
            const t = await tenancy.acquire(`run_side${i}x${round}`);
            try {
              const r = await run(t, 'sleep 0.1; echo done');
              out.push(`${r.exitCode} ${r.signal ?? ''} ${r.output.trim()}`);
            } finally {
              await t.release();
            }
          }
          return out;
        }),
      ).finally(() => (running = false));
      assert.deepEqual(results.flat(), Array(16).fill('0  done'));
      assert.ok((await reaps) >= 3);
    } finally {
      running = false;
      await reaps;
      fs.rmSync(otherWork, { recursive: true, force: true });
    }
  });

  test('when a command tries what a sandbox escape needs, then no_new_privs and the seccomp filter are on and each attempt is refused', async () => {
    const t = await tenancy.acquire('run_harden1');
    try {
      const status = await run(t, 'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status');
      assert.match(status.output, /NoNewPrivs:\s+1/);
      if (seccompFilter()) assert.match(status.output, /Seccomp:\s+2/, 'a filter is loaded');
      // Each probe prints what the kernel answered; every one must be refused.
      const probes: [string, string][] = [
        ['a user namespace (unshare -r)', 'unshare -r true'],
        ['a user namespace (the raw call)', `perl -e 'exit(syscall(272, 0x10000000) == 0 ? 0 : 1)'`],
        ['a clone into new namespaces', `perl -e 'exit(syscall(56, 0x10000000 | 17, 0, 0, 0, 0) >= 0 ? 0 : 1)'`],
        ['mount', 'mount -t tmpfs x /tmp'],
        ['ptrace of its own child', `perl -e 'my $p = fork // die; if (!$p) { sleep 5; exit } exit(syscall(101, 16, $p, 0, 0) == 0 ? 0 : 1)'`],
        ['the kernel keyring', `perl -e 'exit(syscall(250, 0, -3, 0) >= 0 ? 0 : 1)'`],
        ['bpf', `perl -e 'exit(syscall(321, 0, 0, 0) >= 0 ? 0 : 1)'`],
      ];
      for (const [what, probe] of probes) {
        const r = await run(t, probe);
        assert.notEqual(r.exitCode, 0, `${what} is refused: ${r.output}`);
      }
      // What a command needs still works: forking, threads, a program that execs another.
      const fine = await run(t, `perl -e 'my $p = fork // die "fork: $!"; if (!$p) { exit 7 } waitpid($p, 0); print $? >> 8, "\\n"'; python3 -c "import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()" 2>/dev/null || echo thread; echo done`);
      assert.deepEqual(fine.output.trim().split('\n'), ['7', 'thread', 'done']);
    } finally {
      await t.release();
    }
  });

  test('when a command looks around the host, then it sees only the system folders, read-only, and its own disk: no project checkout, home, service data, cgroups or host PIDs', async () => {
    const t = await tenancy.acquire('run_view1');
    try {
      const checkout = path.resolve(import.meta.dirname, '../../../..');
      const r = await run(t, `ls -A /; echo ---; ls ${checkout} /root /home/* /sys/fs/cgroup /var/lib 2>&1 | head -5; echo ---; touch /usr/x /etc/x 2>&1; echo ---; ls /proc | grep -cE "^[0-9]+$"; pwd`);
      const [top, hidden, writes, tail] = r.output.split('---\n');
      const names = top!.trim().split('\n');
      assert.deepEqual(names.filter((n) => !['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'usr', 'etc', 'dev', 'proc', 'tmp', 'var', 'run', 'home'].includes(n)), [], `only the system folders at / (${names.join(' ')})`);
      assert.ok(names.includes(t.dir.split('/')[1]!) || t.dir.startsWith('/tmp/'), 'the disk is there at its own path');
      assert.doesNotMatch(hidden!, /package\.json|Makefile|cgroup\.procs/, `nothing of the host: ${hidden}`);
      assert.match(writes!, /Read-only file system.*\n.*Read-only file system/s);
      const [count, cwd] = tail!.trim().split('\n');
      assert.ok(Number(count) <= 4, `only its own processes (${count})`);
      assert.equal(cwd, t.dir);
    } finally {
      await t.release();
    }
  });
});
