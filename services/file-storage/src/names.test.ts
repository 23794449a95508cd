import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { checkDiskPath, checkFileName, safeTarget } from './names.js';

test('when a file name is checked, then single safe segments pass and the rest are refused', () => {
  for (const ok of ['a.txt', 'report 2026.csv', 'ünïcødé.md', 'x'.repeat(255), '...hidden']) assert.equal(checkFileName(ok), ok);
  for (const bad of ['', '.', '..', 'a/b', 'a\\b', 'nul\u0000', 'é'.repeat(128)]) {
    assert.throws(() => checkFileName(bad), InvalidArgumentError, JSON.stringify(bad));
  }
});

test('when a disk path is checked, then traversal and absolute paths are refused', () => {
  assert.equal(checkDiskPath('out/data/result.json'), 'out/data/result.json');
  for (const bad of ['../etc/passwd', 'a/../../b', '/etc/passwd', 'a//b', 'a/./b', '']) {
    assert.throws(() => checkDiskPath(bad), InvalidArgumentError, bad);
  }
});

test('when a directory on the way is a symlink out of the disk, then no target inside it is given', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-disk-'));
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-outside-'));
  fs.symlinkSync(outside, path.join(root, 'escape'));
  await assert.rejects(safeTarget(root, 'escape/pwned.txt'), InvalidArgumentError);
  assert.equal(fs.readdirSync(outside).length, 0);
  const ok = await safeTarget(root, 'deep/er/file.txt');
  assert.equal(ok, path.join(fs.realpathSync(root), 'deep', 'er', 'file.txt'));
  assert.ok(fs.statSync(path.join(root, 'deep', 'er')).isDirectory());
});
