/** Browser uids on a host shared by several pools (another replica, another checkout's stack). */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { processStartTime } from '../../common/src/process-start.js';
import { releaseUid, takeUid } from './confinement.js';

describe('browser uids on one host', () => {
  // A range no real pool uses, so the test never takes a live pool's uid.
  const base = 1_500_000 + Math.floor(Math.random() * 100_000) * 10;
  // The host's registry, shared with live pools: the test removes only its own files.
  const registry = path.join(os.tmpdir(), `ats-browser-uids-${process.getuid?.() ?? 0}`);
  after(() => {
    for (let uid = base; uid < base + 10; uid++) fs.rmSync(path.join(registry, String(uid)), { force: true });
  });

  test('when another live pool holds a uid, then this pool skips it; a uid whose holder is gone is taken over; a release frees only its own', () => {
    fs.mkdirSync(registry, { recursive: true });
    // The first uid is held by a live process of another pool (the test runner's parent stands in for it).
    const other = JSON.stringify({ pid: process.ppid, start: processStartTime(process.ppid) });
    fs.writeFileSync(path.join(registry, String(base)), other);
    // The second by a pool that died: its pid is gone.
    const dead = spawnSync('true').pid!;
    fs.writeFileSync(path.join(registry, String(base + 1)), JSON.stringify({ pid: dead, start: 1 }));

    const first = takeUid(base);
    const second = takeUid(base);
    assert.deepEqual([first, second], [base + 1, base + 2], "the live pool's uid is skipped, the dead one's taken over");
    assert.equal(JSON.parse(fs.readFileSync(path.join(registry, String(first)), 'utf8')).pid, process.pid, 'claimed on the host');

    releaseUid(first);
    releaseUid(second);
    const ours = () => fs.readdirSync(registry).filter((n) => Number(n) >= base && Number(n) < base + 10).sort();
    assert.deepEqual(ours(), [String(base)], "released uids leave the registry; the other pool's claim stays");
    assert.equal(takeUid(base), base + 1, 'a released uid is taken again');
    releaseUid(base + 1);
  });

  test('when another pool\'s range overlaps this one (another BROWSER_UID_BASE), then a uid it holds is skipped all the same', () => {
    const other = JSON.stringify({ pid: process.ppid, start: processStartTime(process.ppid) });
    fs.writeFileSync(path.join(registry, String(base + 5)), other);
    const uid = takeUid(base + 5);
    assert.equal(uid, base + 6);
    releaseUid(uid);
  });
});
