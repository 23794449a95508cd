/** Real Chromium processes: process groups, directories, and reaping what a crashed pool left. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { createLogger } from '../../common/src/logger.js';
import { Chromium, killStrays, strayTempDirs } from './chromium.js';
import { groupMembers, processesUsing } from './process-groups.js';

const logger = createLogger('test', 'silent');
const roots: string[] = [];
const newRoot = () => {
  const r = path.join(tempDir('bp-chromium'), 'browsers');
  roots.push(r);
  return r;
};
const launch = (rootDir: string, id: string) => Chromium.launch({ executable: '/usr/bin/chromium', rootDir, id, width: 800, height: 600, noSandbox: process.getuid?.() === 0, logger });
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
  assert.match(a.wsUrl, /^ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\//);
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

test('when a pool crashed and left browsers behind, then killStrays kills exactly those groups', async () => {
  const mine = newRoot();
  const other = newRoot();
  const [left1, left2, foreign] = await Promise.all([launch(mine, 'brw_left1'), launch(mine, 'brw_left2'), launch(other, 'brw_foreign')]);
  const killed = await killStrays(mine, logger);
  assert.deepEqual(killed.sort(), [left1.pgid, left2.pgid].sort());
  assert.deepEqual(live(mine), []);
  assert.ok(groupMembers(foreign.pgid).length > 0, "another pool's browser survives");
  assert.equal(strayTempDirs(mine).length, 2, 'their temporary dirs are found for removal');
  await Promise.all([left1.stop(), left2.stop(), foreign.stop()]);
});

test('when Chromium cannot start, then launch fails with the reason and leaves no directory', async () => {
  const root = newRoot();
  await assert.rejects(
    Chromium.launch({ executable: '/nonexistent/chromium', rootDir: root, id: 'brw_none', width: 800, height: 600, noSandbox: true, logger }),
    /cannot start Chromium at \/nonexistent\/chromium/,
  );
  assert.deepEqual(fs.readdirSync(root), []);
  assert.deepEqual(strayTempDirs(root), []);
});
