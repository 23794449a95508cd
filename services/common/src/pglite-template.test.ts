import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { tempDir } from '../../../test/support/infra.js';
import { seedPgdata } from './pglite-template.js';

const root = tempDir('pglite-template');
after(() => fs.rmSync(root, { recursive: true, force: true }));

test('when three data directories are seeded at once, then one template is built and each copy is a database of its own', async () => {
  const templates = path.join(root, 'templates');
  const dirs = ['a', 'b', 'c'].map((n) => path.join(root, n, 'pgdata'));
  for (const d of dirs) fs.mkdirSync(path.dirname(d), { recursive: true });
  await Promise.all(dirs.map((d) => seedPgdata(d, templates)));
  assert.deepEqual(fs.readdirSync(templates).filter((n) => !n.endsWith('.lock')).length, 1, `templates: ${fs.readdirSync(templates).join(', ')}`);
  assert.deepEqual(fs.readdirSync(path.join(root, 'a')), ['pgdata'], 'no half-copied folder is left beside it');

  const a = new PGlite(dirs[0]);
  await a.exec('create table t (n int); insert into t values (1)');
  await a.close();
  const b = new PGlite(dirs[1]);
  const { rows } = await b.query<{ n: number }>(`select count(*)::int as n from pg_tables where tablename = 't'`);
  await b.close();
  assert.equal(rows[0]!.n, 0, 'a table made in one copy is not in another');
  const again = new PGlite(dirs[0]);
  const kept = await again.query<{ n: number }>('select n from t');
  await again.close();
  assert.deepEqual(kept.rows, [{ n: 1 }], 'the copy keeps its data when opened again');
});

test('when the data directory already holds a database, then it is left as it is', async () => {
  const pgdata = path.join(root, 'existing', 'pgdata');
  fs.mkdirSync(pgdata, { recursive: true });
  fs.writeFileSync(path.join(pgdata, 'PG_VERSION'), '17\n');
  await seedPgdata(pgdata, path.join(root, 'templates'));
  assert.deepEqual(fs.readdirSync(pgdata), ['PG_VERSION']);
});
