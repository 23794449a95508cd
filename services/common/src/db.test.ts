import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { drivers, postgresUrl, tempDir, testSchema } from '../../../test/support/infra.js';
import { pgliteTemplatesDir } from './config.js';
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

describe('replicas starting together on Postgres', { skip: !(await postgresUrl()) && 'no Postgres on 127.0.0.1:5432' }, () => {
  const twoSteps: Migration[] = [...migrations, { name: '20261122000001_more', up: (knex) => knex.schema.alterTable('things', (t) => t.text('note')) }];

  test('when ten open one empty schema at once, then all open, and each migration ran once', async () => {
    const schema = testSchema();
    const opts = { service: 'svc', dataDir: tempDir('db-ten'), databaseUrl: (await postgresUrl())!, schema, migrations: twoSteps };
    const dbs = await Promise.all(Array.from({ length: 10 }, () => openDatabase(opts)));
    try {
      const applied = await dbs[0]!.knex('knex_migrations').select('name');
      assert.deepEqual(applied.map((r) => r.name), twoSteps.map((m) => m.name));
      await dbs[9]!.knex('things').insert({ id: 'a', n: 1, note: 'x' });
    } finally {
      await dbs[0]!.knex.raw(`drop schema "${schema}" cascade`);
      await Promise.all(dbs.map((d) => d.stop()));
    }
  });

  test('when a process died holding the knex migration lock, then the next start frees it and migrates', async () => {
    const schema = testSchema();
    const opts = { service: 'svc', dataDir: tempDir('db-stale'), databaseUrl: (await postgresUrl())!, schema, migrations };
    const first = await openDatabase(opts);
    await first.knex('knex_migrations_lock').update({ is_locked: 1 });
    await first.stop();
    const next = await openDatabase({ ...opts, migrations: twoSteps });
    try {
      assert.equal((await next.knex('knex_migrations').select('name')).length, 2);
    } finally {
      await next.knex.raw(`drop schema "${schema}" cascade`);
      await next.stop();
    }
  });
});

test("when new embedded databases are made, then each starts as a copy with the service's migrations applied, and changed migrations make a new template", async () => {
  const service = `tmpl${Math.random().toString(36).slice(2, 8)}`; // its templates are removed after
  const ran: string[] = [];
  const counted = (m: Migration): Migration => ({ name: m.name, up: async (knex) => (ran.push(m.name), m.up(knex)) });
  const more: Migration = { name: '20261122000001_more', up: (knex) => knex.schema.alterTable('things', (t) => t.text('note')) };
  const dirs = [tempDir('db-layer'), tempDir('db-layer'), tempDir('db-layer')];
  try {
    const a = await openDatabase({ service, dataDir: dirs[0]!, migrations: [counted(migrations[0]!)] });
    await a.knex('things').insert({ id: 'a', n: 1 });
    await a.stop();
    const b = await openDatabase({ service, dataDir: dirs[1]!, migrations: [counted(migrations[0]!)] });
    assert.equal(toCount((await b.knex('things').count({ c: '*' }))[0]!.c), 0, 'a row of one database is not in another');
    assert.deepEqual((await b.knex('knex_migrations').select('name')).map((r) => r.name), [migrations[0]!.name]);
    await b.stop();
    assert.deepEqual(ran, [migrations[0]!.name], 'the migration ran once, for the template');

    // Templates of earlier migrations: one unused for two days is removed when the next is built, a recent one stays.
    const templates = pgliteTemplatesDir(dirs[0]!);
    const made = fs.readdirSync(templates).find((n) => n.includes(`-${service}-`))!;
    const family = made.slice(0, made.lastIndexOf('-') + 1);
    const [stale, recent] = [`${family}000000000000`, `${family}111111111111`].map((n) => path.join(templates, n));
    for (const d of [stale!, recent!]) fs.mkdirSync(d);
    fs.utimesSync(stale!, new Date(Date.now() - 2 * 86400_000), new Date(Date.now() - 2 * 86400_000));

    const c = await openDatabase({ service, dataDir: dirs[2]!, migrations: [counted(migrations[0]!), counted(more)] });
    await c.knex('things').insert({ id: 'c', n: 3, note: 'new column' });
    await c.stop();
    assert.deepEqual(ran, [migrations[0]!.name, migrations[0]!.name, more.name], 'a new template, with both');
    assert.ok(!fs.existsSync(stale!) && fs.existsSync(recent!) && fs.existsSync(path.join(templates, made)), 'only the template unused for a day was removed');
  } finally {
    const templates = pgliteTemplatesDir(dirs[0]!);
    for (const n of fs.existsSync(templates) ? fs.readdirSync(templates) : []) if (n.includes(`-${service}-`)) fs.rmSync(path.join(templates, n), { recursive: true, force: true });
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
});

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
