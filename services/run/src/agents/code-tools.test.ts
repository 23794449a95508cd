import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { readDiskFile, withoutHostPath, writeDiskFile } from './code-tools.js';

test("when a file of the run's disk cannot be read or written, then the error names it relative to the disk, never the host folder", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disk-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // A name longer than the file system allows fails in the system call, whose message names the full path.
  const long = `${'a'.repeat(300)}.txt`;
  for (const outcome of [await readDiskFile(dir, long), await writeDiskFile(dir, long, 'y')]) {
    assert.ok('error' in outcome && outcome.error && /ENAMETOOLONG/.test(outcome.error), JSON.stringify(outcome));
    assert.ok(!outcome.error.includes(dir) && !outcome.error.includes(os.tmpdir()), outcome.error);
  }
  assert.equal(withoutHostPath(`EACCES: permission denied, open '${dir}/a/b.txt'`, dir), "EACCES: permission denied, open 'a/b.txt'");
  assert.equal(withoutHostPath(`EISDIR: illegal operation on a directory, read '${dir}'`, dir), "EISDIR: illegal operation on a directory, read '.'");
});
