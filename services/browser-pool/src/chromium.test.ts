/** Real Chromium processes: process groups, directories, and reaping what a crashed pool left. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { createLogger } from '../../common/src/logger.js';
import { Chromium, killStrays, strayTempDirs } from './chromium.js';
import { defaultChromiumPath } from './config.js';
import { CALM_SHARES, CpuGroup } from './cpu-group.js';
import { groupMembers, processesUsing } from './process-groups.js';
import { hostConfinement } from './testing/confinement.js';

const logger = createLogger('test', 'silent');
const roots: string[] = [];
const newRoot = () => {
  const r = path.join(tempDir('bp-chromium'), 'browsers');
  roots.push(r);
  return r;
};
const launch = (rootDir: string, id: string) => Chromium.launch({ executable: defaultChromiumPath(), rootDir, id, width: 800, height: 600, confinement: hostConfinement(), logger });
const live = (rootDir: string) => processesUsing(`--user-data-dir=${rootDir}${path.sep}`);

after(() => {
  for (const r of roots) {
    for (const p of live(r)) process.kill(-p.pgid, 'SIGKILL');
    fs.rmSync(path.dirname(r), { recursive: true, force: true });
  }
});

test('when two browsers are launched, then each leads its own process group with its own directories, and stop leaves nothing', async () => {
  const root = newRoot();
  const [a, b] = await Promise.all([launch(root, 'brw_one'), launch(root, 'brw_two')]);
  assert.notEqual(a.pgid, b.pgid);
  assert.notEqual(a.pgid, process.pid);
  assert.ok(groupMembers(a.pgid).length > 1, 'Chromium runs several processes in its group');
  assert.ok(live(root).every((p) => p.pgid === a.pgid || p.pgid === b.pgid), 'every Chromium process is in one of the two groups');
  assert.ok(fs.existsSync(a.userDataDir) && fs.existsSync(b.userDataDir) && a.userDataDir !== b.userDataDir);
  const version = await a.conn.send<{ product: string }>('Browser.getVersion');
  assert.match(version.product, /Chrome/);

  await a.stop();
  assert.deepEqual(groupMembers(a.pgid), [], 'the whole group is gone once stop resolves');
  assert.ok(groupMembers(b.pgid).length > 0, 'the other browser is untouched');
  await a.removed;
  assert.equal(fs.existsSync(a.dir), false);
  assert.equal(fs.existsSync(a.tmpDir), false);
  await a.stop(); // idempotent
  await b.stop();
  await b.removed;
  assert.deepEqual(live(root), []);
  assert.deepEqual(fs.readdirSync(root), []);
  assert.deepEqual(strayTempDirs(root), []);
});

test('when a browser is launched, then it is Chromium itself with the pool\'s flags (no wrapper script\'s) and runs only its page: no browser UI (the omnibox popup headless Chromium renders) and no renderer for it', async () => {
  const root = newRoot();
  const b = await launch(root, 'brw_lean');
  try {
    const { targetInfos } = await b.conn.send<{ targetInfos: { type: string; url: string; targetId: string }[] }>('Target.getTargets', { filter: [{}] });
    assert.deepEqual(
      targetInfos.filter((t) => t.type !== 'tab').map((t) => `${t.type} ${t.url}`),
      ['page about:blank'],
    );
    // The page answers from its renderer: on a loaded machine that renderer can still be starting when the launch returns.
    const page = targetInfos.find((t) => t.type === 'page')!;
    const { sessionId } = await b.conn.send<{ sessionId: string }>('Target.attachToTarget', { targetId: page.targetId, flatten: true });
    await b.conn.send('Runtime.evaluate', { expression: '1' }, sessionId);
    const cmdlines = groupMembers(b.pgid).map((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    // Chromium itself, not a wrapper script: Debian's /usr/bin/chromium would add an extension to load (uBlock Origin, with
    // block_ads off too), extensions from the web store and GPU rasterization (retitled, the arguments read as one line).
    const argvOf = (cmdline: string) => {
      const c = cmdline.replace(/\0+$/, '');
      return c.split(c.includes('\0') ? '\0' : ' ');
    };
    const main = cmdlines.map(argvOf).find((argv) => /chromium$/.test(argv[0]!) && argv.includes('--remote-debugging-pipe'));
    assert.ok(main, `Chromium's own process among ${cmdlines.length}`);
    assert.deepEqual(main.filter((a) => /^--(load-extension|enable-remote-extensions|enable-gpu-rasterization)\b/.test(a)), [], 'flags the pool did not give');
    const renderers = cmdlines.filter((c) => /--type=renderer/.test(c));
    assert.equal(renderers.filter((c) => c.includes('--top-chrome-webui')).length, 0, 'no WebUI renderer');
    assert.equal(renderers.length, 1, "one renderer: its page's");
  } finally {
    await b.stop();
  }
});

test('when browsers are launched nicer than the pool, then every process of Chromium runs at that priority and the pool at its own', async () => {
  const root = newRoot();
  const niceOf = (pid: number) => {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  };
  const mine = niceOf(process.pid);
  const b = await Chromium.launch({ executable: defaultChromiumPath(), rootDir: root, id: 'brw_nice', width: 800, height: 600, confinement: hostConfinement(), logger, nice: 7 });
  try {
    const members = groupMembers(b.pgid);
    assert.ok(members.length > 1);
    assert.deepEqual([...new Set(members.map(niceOf))], [Math.min(19, mine + 7)], 'Chromium and its helpers');
    assert.equal(niceOf(b.supervisor.pid), Math.min(19, mine + 7), 'its supervisor');
    assert.equal(niceOf(process.pid), mine, 'the pool keeps its priority');
  } finally {
    await b.stop();
  }
});

test("when the pool has a browsers' cgroup, then Chromium and its supervisor run in it, held down while several start, the pool outside it, and the group goes with the last browser", async (t) => {
  const root = newRoot();
  const group = CpuGroup.open({ rootDir: root, shares: 300, logger });
  if (!group) return t.skip('no writable cgroup v1 cpu hierarchy here (not root, or cgroup v2): the pool runs browsers with nice alone');
  try {
    const shares = () => fs.readFileSync(path.join(group.dir, 'cpu.shares'), 'utf8').trim();
    assert.equal(shares(), String(CALM_SHARES), 'outside a burst it weighs about what its browsers would alone');
    group.bursting(true);
    assert.equal(shares(), '300', 'while several browsers start, its weight is held down');
    group.bursting(false);
    assert.equal(shares(), String(CALM_SHARES));
    const b = await Chromium.launch({ executable: defaultChromiumPath(), rootDir: root, id: 'brw_cpu', width: 800, height: 600, confinement: hostConfinement(), logger, cpuGroup: group });
    const inGroup = (pid: number) => group.holds(pid);
    try {
      const members = groupMembers(b.pgid);
      assert.ok(members.length > 1);
      assert.deepEqual(members.filter((pid) => !inGroup(pid)), [], "every Chromium process is in the browsers' group");
      assert.ok(inGroup(b.supervisor.pid), 'its supervisor too');
      assert.equal(inGroup(process.pid), false, 'the pool stays beside it');
      group.remove();
      assert.ok(fs.existsSync(group.dir), 'a group with a browser in it is kept');
    } finally {
      await b.stop();
    }
    await until(() => fs.readFileSync(path.join(group.dir, 'cgroup.procs'), 'utf8').trim() === '', { timeoutMs: 10_000, what: 'the group empty' });
    group.remove();
    assert.equal(fs.existsSync(group.dir), false, 'the empty group is removed');
  } finally {
    group.remove();
  }
});

test('when a pool crashed and left browsers behind, then killStrays kills exactly those groups', async () => {
  const mine = newRoot();
  const other = newRoot();
  const [left1, left2, foreign] = await Promise.all([launch(mine, 'brw_left1'), launch(mine, 'brw_left2'), launch(other, 'brw_foreign')]);
  const killed = await killStrays(mine, logger);
  assert.deepEqual(killed.sort(), [left1.pgid, left2.pgid].sort());
  assert.deepEqual(live(mine), []);
  assert.ok(groupMembers(foreign.pgid).length > 0, "another pool's browser survives");
  assert.equal(strayTempDirs(mine).length, hostConfinement().namespaces ? 0 : 2, 'their temporary dirs (outside a namespace) are found for removal');
  await Promise.all([left1.stop(), left2.stop(), foreign.stop()]);
});

test('when Chromium cannot start, then launch fails with the reason and leaves no directory', async () => {
  const root = newRoot();
  await assert.rejects(
    Chromium.launch({ executable: '/nonexistent/chromium', rootDir: root, id: 'brw_none', width: 800, height: 600, confinement: hostConfinement(), logger }),
    /cannot start Chromium at \/nonexistent\/chromium/,
  );
  assert.deepEqual(fs.readdirSync(root), []);
  assert.deepEqual(strayTempDirs(root), []);
});

/** uid of a process, from /proc. */
const uidOf = (pid: number) => Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
/** uids owning a listening TCP socket on this host (IPv4 and IPv6). */
function listeningUids(): Set<number> {
  const out = new Set<number>();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(f, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === '0A') out.add(Number(cols[7])); // state LISTEN, uid column
    }
  }
  return out;
}

const confined = hostConfinement();
const skipUnconfined = confined.namespaces && confined.uidBase !== undefined ? false : 'needs root and mount namespaces';

test('when browsers run confined, then each runs as a uid of its own with its sandbox on, no DevTools port and none of the service environment', { skip: skipUnconfined }, async () => {
  const root = newRoot();
  process.env.ATS_TEST_SECRET = 'the-service-secret-0123456789';
  const [a, b] = await Promise.all([launch(root, 'brw_uid1'), launch(root, 'brw_uid2')]);
  delete process.env.ATS_TEST_SECRET;
  try {
    assert.ok(a.uid !== undefined && b.uid !== undefined && a.uid !== b.uid && a.uid >= 1000, `own uids: ${a.uid}, ${b.uid}`);
    const members = groupMembers(a.pgid).filter((pid) => uidOf(pid) !== 0);
    assert.ok(members.length > 1, 'Chromium processes run under the browser uid');
    assert.ok(
      groupMembers(a.pgid).every((pid) => [0, a.uid].includes(uidOf(pid))),
      'only the namespace helper runs as root; every Chromium process as the browser uid',
    );
    for (const pid of members) {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      assert.doesNotMatch(cmd, /--no-sandbox|--remote-debugging-port/);
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
      assert.doesNotMatch(env, /the-service-secret|DATABASE_URL|SIGNING_SECRET/);
    }
    assert.equal(listeningUids().has(a.uid), false, 'no process of the browser listens on a TCP port');
    assert.equal(listeningUids().has(b.uid), false);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test("when a browser runs confined, then it sees its own folder but not the service's data, the host's sockets or other browsers, and file: URLs are blocked", { skip: skipUnconfined }, async () => {
  const root = newRoot();
  const secret = path.join(path.dirname(root), 'signing-secret');
  fs.writeFileSync(secret, 'secret', { mode: 0o644 });
  const [a, b] = await Promise.all([launch(root, 'brw_view1'), launch(root, 'brw_view2')]);
  try {
    const chromiumPid = groupMembers(a.pgid).find((pid) => uidOf(pid) === a.uid)!;
    const seen = (p: string) => fs.existsSync(`/proc/${chromiumPid}/root${p}`);
    assert.equal(seen(a.userDataDir), true, 'its own profile is there');
    assert.equal(seen(secret), false, 'a service file beside the browsers is hidden');
    assert.equal(seen(b.userDataDir), false, "another browser's profile is hidden");
    assert.equal(seen(process.cwd()), false, 'the service checkout is hidden');
    const hostRun = fs.readdirSync('/run').filter((n) => n !== 'mount');
    assert.ok(hostRun.length > 0, 'the host has something in /run to hide');
    assert.deepEqual(fs.readdirSync(`/proc/${chromiumPid}/root/run`).filter((n) => hostRun.includes(n)), [], '/run (host Unix sockets) is not visible');
    // Nothing of the host's /dev/shm but the way to its own folder, when that lies in it (make test keeps its files there).
    const marker = `/dev/shm/ats-host-marker-${process.pid}`;
    fs.writeFileSync(marker, 'host');
    try {
      const hostShm = fs.readdirSync('/dev/shm').filter((n) => !a.userDataDir.startsWith(`/dev/shm/${n}/`));
      assert.deepEqual(fs.readdirSync(`/proc/${chromiumPid}/root/dev/shm`).filter((n) => hostShm.includes(n)), [], '/dev/shm is private');
    } finally {
      fs.rmSync(marker, { force: true });
    }

    assert.equal(confined.netNamespace, true, 'as root with socat and iproute2 (make deps installs them), browsers get a network namespace');
    if (confined.netNamespace) {
      const devices = fs.readFileSync(`/proc/${chromiumPid}/net/dev`, 'utf8').split('\n').slice(2).filter(Boolean).map((l) => l.trim().split(':')[0]);
      assert.deepEqual(devices, ['lo'], 'its network namespace has loopback only');
      // An abstract Unix socket of the host (X11, D-Bus, container runtimes use them) is out of its reach.
      const abstract = net.createServer().listen('\0ats-test-host-abstract');
      await once(abstract, 'listening');
      try {
        assert.match(fs.readFileSync('/proc/self/net/unix', 'utf8'), /@ats-test-host-abstract/);
        assert.doesNotMatch(fs.readFileSync(`/proc/${chromiumPid}/net/unix`, 'utf8'), /@ats-test-host-abstract/);
      } finally {
        abstract.close();
      }
    }

    const { targetId } = await a.conn.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await a.conn.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    if (confined.policyDir) {
      const nav = await a.conn.send<{ errorText?: string }>('Page.navigate', { url: `file://${a.userDataDir}` }, sessionId);
      assert.equal(nav.errorText, 'net::ERR_BLOCKED_BY_ADMINISTRATOR', 'even the pool itself cannot open file: URLs');
    }
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});
