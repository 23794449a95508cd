/** The per-browser supervisor with real Chromium: who may connect, where a new connection starts, when it ends. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { createLogger } from '../../common/src/logger.js';
import { Chromium } from './chromium.js';
import { groupMembers } from './process-groups.js';
import { connectSupervisor, stopSupervisor, supervisorAlive, supervisorDir } from './supervisor.js';
import { hostConfinement } from './testing/confinement.js';
import { defaultChromiumPath } from './config.js';

const logger = createLogger('test', 'silent');
const launched: Chromium[] = [];
const launch = async (id: string, restartGraceMs?: number) => {
  const c = await Chromium.launch({ executable: defaultChromiumPath(), rootDir: path.join(tempDir('bp-sup'), 'browsers'), id, width: 800, height: 600, confinement: hostConfinement(), logger, restartGraceMs });
  launched.push(c);
  return c;
};
after(async () => {
  await Promise.all(launched.map((c) => c.stop()));
  // A detached browser's stop does nothing (it is left for a next pool): its supervisor, this process's child, would hold the file open through its grace time.
  for (const c of launched) if (supervisorAlive(c.supervisor)) stopSupervisor(c.supervisor);
  await Promise.all(launched.map((c) => c.exited));
});

/** NUL-terminated messages as they arrive on a raw connection; `answer(id)` resolves with the one answering `id`. */
function reader(s: net.Socket): { messages: string[]; first: () => string; answer: (id: number, timeoutMs: number) => Promise<any> } {
  const messages: string[] = [];
  const waiting = new Map<number, (m: any) => void>();
  let buffer = '';
  let first = '';
  s.setEncoding('utf8');
  s.on('data', (chunk: string) => {
    if (!first) first = chunk;
    buffer += chunk;
    for (let at = buffer.indexOf('\0'); at !== -1; at = buffer.indexOf('\0')) {
      const m = buffer.slice(0, at);
      messages.push(m);
      buffer = buffer.slice(at + 1);
      const id = (JSON.parse(m) as { id?: number }).id;
      if (id !== undefined) waiting.get(id)?.(JSON.parse(m));
    }
  });
  const answer = (id: number, timeoutMs: number) =>
    new Promise<any>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${id} within ${timeoutMs} ms`)), timeoutMs);
      waiting.set(id, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
    });
  return { messages, first: () => first, answer };
}

test("when the pool's connection breaks in the middle of a message each way, then the next connection starts at a message boundary and its first command is answered", async () => {
  const c = await launch('brw_sup_torn');
  c.detach();
  const a = await connectSupervisor(c.supervisor.socket);
  const ra = reader(a);
  const targets = ra.answer(1, 10_000);
  a.write(`${JSON.stringify({ id: 1, method: 'Target.getTargets' })}\0`);
  const page = ((await targets).result.targetInfos as { targetId: string; type: string }[]).find((t) => t.type === 'page')!;
  const attached = ra.answer(2, 10_000);
  a.write(`${JSON.stringify({ id: 2, method: 'Target.attachToTarget', params: { targetId: page.targetId, flatten: true } })}\0`);
  const sessionId = (await attached).result.sessionId as string;
  // A 4 MB answer: the connection goes once its first bytes came, mid-message; and with a command half written.
  const before = ra.messages.length;
  let got = 0;
  const mid = new Promise<void>((resolve) => a.on('data', (chunk: string) => (got += chunk.length) > 100_000 && resolve()));
  a.write(`${JSON.stringify({ id: 3, sessionId, method: 'Runtime.evaluate', params: { expression: "'x'.repeat(4e6)", returnByValue: true } })}\0`);
  await mid;
  assert.equal(ra.messages.length, before, 'the large answer had not come whole');
  a.write('{"id":4,"method":"Browser.getVer');
  a.destroy();
  await once(a, 'close'); // the pool is gone before the next one connects

  const b = await connectSupervisor(c.supervisor.socket);
  const rb = reader(b);
  const version = rb.answer(5, 20_000);
  b.write(`${JSON.stringify({ id: 5, method: 'Browser.getVersion' })}\0`);
  assert.match((await version).result.product, /Chrome/);
  assert.ok(rb.first().startsWith('{'), `the new connection starts with a whole message: ${rb.first().slice(0, 40)}`);
  for (const m of rb.messages) assert.doesNotThrow(() => JSON.parse(m), `every message is whole JSON: ${m.slice(0, 60)}`);
  assert.ok(!rb.messages.some((m) => JSON.parse(m).id === 3), 'the answer to the dead connection went nowhere');
  b.destroy();
});

test('when a second connection comes while one is held, then it is closed; and the socket is open to this uid alone', async () => {
  const c = await launch('brw_sup_perm');
  const dir = supervisorDir(path.dirname(c.dir));
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700, 'the directory is the pool uid\'s alone');
  assert.equal(fs.statSync(c.supervisor.socket).mode & 0o077, 0, 'the socket has no group or other permission');
  const second = await connectSupervisor(c.supervisor.socket);
  second.resume();
  await Promise.race([once(second, 'end'), new Promise((_, reject) => setTimeout(() => reject(new Error('the second connection is not closed')), 5000))]);
  assert.match((await c.conn.send<{ product: string }>('Browser.getVersion')).product, /Chrome/, 'the held one goes on');
  if (process.getuid?.() !== 0) return; // only root can act as another uid here
  const other = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', process.execPath, '-e', `require('net').connect(${JSON.stringify(c.supervisor.socket)}).on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log(e.code); process.exit(0); })`], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(other.stdout.trim(), 'EACCES', `another uid cannot connect: ${other.stderr}`);
});

test('when Chromium exits, then its supervisor exits too and removes its socket; when the supervisor is told to stop, then Chromium goes with it', async () => {
  const [a, b] = await Promise.all([launch('brw_sup_exit'), launch('brw_sup_term')]);
  process.kill(-a.pgid, 'SIGKILL');
  await a.exited;
  assert.equal(supervisorAlive(a.supervisor), false);
  assert.equal(fs.existsSync(a.supervisor.socket), false, 'its socket is gone');
  process.kill(b.supervisor.pid, 'SIGTERM');
  await b.exited;
  await until(() => groupMembers(b.pgid).length === 0, { timeoutMs: 5000, what: "Chromium's group is gone" });
});

test('when no pool connects within the grace time, then the supervisor ends Chromium and exits', async () => {
  const c = await launch('brw_sup_grace', 1000);
  c.detach();
  await until(() => !supervisorAlive(c.supervisor), { timeoutMs: 10_000, what: 'the supervisor ends after its grace time' });
  await until(() => groupMembers(c.pgid).length === 0, { timeoutMs: 5000, what: "Chromium's group is gone" });
});
