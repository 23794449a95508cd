import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { openPglite } from './pglite.js';

const dataDir = tempDir('pglite');
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** PSS of this process in MB. */
const pssMb = () => Number(/^Pss:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))![1]) / 1024;

test('when a fresh directory is opened, then the database is created there with small shared buffers, and this process does not keep initdb in memory', async () => {
  const before = pssMb();
  const db = await openPglite(path.join(dataDir, 'pgdata'), path.join(dataDir, 'templates'));
  try {
    const held = pssMb() - before;
    assert.ok(fs.existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION')), 'created on disk');
    assert.equal((await db.query<{ shared_buffers: string }>('show shared_buffers')).rows[0]!.shared_buffers, '8MB');
    // Opened in this process, initdb costs ≈ 600 MB that stay; an opened database ≈ 110 MB.
    assert.ok(held < 300, `this process grew by ${held.toFixed(0)} MB`);
    await db.query('create table t (id int)');
    await db.query('insert into t values (1)');
  } finally {
    await db.close();
  }
  const again = await openPglite(path.join(dataDir, 'pgdata'), path.join(dataDir, 'templates'));
  try {
    assert.deepEqual((await again.query('select id from t')).rows, [{ id: 1 }], 'reopened with its data');
  } finally {
    await again.close();
  }
});
