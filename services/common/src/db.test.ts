import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, toCount, type Migration } from './db.js';
import { LockHeldError } from './lock-file.js';

const migrations: Migration[] = [
  {
    name: '20261122000000_things',
    async up(knex) {
      await knex.schema.createTable('things', (t) => {
        t.string('id').primary();
        t.integer('n').notNullable();
      });
    },
  },
];

for (const driver of await drivers()) {
  describe(`database on ${driver.name}`, () => {
    const dataDir = tempDir('db');
    const schema = testSchema();
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    test('when opened twice in a row, then migrations ran once and data survives a restart', async () => {
      const opts = { service: 'svc', dataDir, databaseUrl: driver.databaseUrl, schema, migrations };
      const db = await openDatabase(opts);
      await db.knex('things').insert([{ id: 'a', n: 1 }, { id: 'b', n: 2 }]);
      await db.stop();
      const again = await openDatabase(opts);
      try {
        const [{ c }] = await again.knex('things').count({ c: '*' });
        assert.equal(toCount(c), 2);
        const applied = await again.knex('knex_migrations').select('name');
        assert.deepEqual(applied.map((r) => r.name), ['20261122000000_things']);
      } finally {
        if (again.schema) await again.knex.raw(`drop schema "${again.schema}" cascade`);
        await again.stop();
      }
    });
  });
}

test('when a second process opens the same embedded database, then the lock refuses it', async () => {
  const dataDir = tempDir('db-lock');
  const db = await openDatabase({ service: 'svc', dataDir, migrations });
  try {
    // Same process, so fake another holder by pointing the lock at the parent's pid.
    fs.writeFileSync(`${dataDir}/svc/.lock`, String(process.ppid));
    await assert.rejects(openDatabase({ service: 'svc', dataDir, migrations }), LockHeldError);
  } finally {
    fs.writeFileSync(`${dataDir}/svc/.lock`, String(process.pid));
    await db.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
