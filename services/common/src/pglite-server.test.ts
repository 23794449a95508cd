import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { PGlite } from '@electric-sql/pglite';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { tempDir } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { pgliteTemplatesDir } from './config.js';
import { openDatabase, toCount, type Database, type Migration } from './db.js';
import { embeddedDatabaseUrl, embeddedSocketPath } from './embedded-database.js';
import { openPglite } from './pglite.js';
import { lastReadyStatus, PgliteServer, searchPathSet } from './pglite-server.js';

const notes: Migration[] = [
  {
    name: '20261127000000_notes',
    async up(knex) {
      await knex.schema.createTable('notes', (t) => {
        t.increments('id');
        t.string('text').notNullable();
      });
    },
  },
];

describe('the embedded database served to several clients', () => {
  const dataDir = tempDir('pglite-server');
  let pglite: PGlite;
  let server: PgliteServer;
  let url: string;
  const opened: Database[] = [];
  const open = async (service: string) => {
    const db = await openDatabase({ service, dataDir, databaseUrl: url, migrations: notes });
    opened.push(db);
    return db;
  };
  /** A client of its own (one connection), for statements that must run on one session. */
  const single = (): Knex => knexFactory({ client: 'pg', connection: url, pool: { min: 1, max: 1 } });

  before(async () => {
    url = embeddedDatabaseUrl(dataDir);
    pglite = await openPglite(path.join(dataDir, 'database', 'pgdata'), pgliteTemplatesDir(dataDir));
    server = new PgliteServer({ db: pglite, password: decodeURIComponent(new URL(url).password), idleInTransactionMs: 400 });
    await server.listen(embeddedSocketPath(dataDir));
  });
  after(async () => {
    for (const db of opened) await db.stop();
    await server.stop();
    await pglite.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('when two services open it, then each has its own tables in its own schema, and both know it is one session', async () => {
    const [a, b] = [await open('svc-a'), await open('svc-b')];
    assert.equal(a.driver, 'pglite', 'a service on the embedded database treats it as one session (no transaction across a call to another service)');
    await a.knex('notes').insert({ text: 'of a' });
    await b.knex('notes').insert([{ text: 'of b' }, { text: 'of b too' }]);
    // Interleaved from both pools: each query runs on its own client's search_path.
    const reads = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).knex('notes').count({ c: '*' })));
    reads.forEach(([{ c }], i) => assert.equal(toCount(c), i % 2 ? 1 : 2, `read ${i} saw its own schema`));
    const schemas = await a.knex.raw("select table_schema from information_schema.tables where table_name = 'notes' order by 1");
    assert.deepEqual(schemas.rows.map((r: { table_schema: string }) => r.table_schema), ['svc_a', 'svc_b']);
  });

  test('when many parameterised queries from several clients overlap, then each gets its own answer', async () => {
    const dbs = [await open('svc-a'), await open('svc-b'), await open('svc-c')];
    const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => dbs[i % 3]!.knex.raw('select ?::int * 2 as n, ?::text as who', [i, `c${i % 3}`])));
    answers.forEach((r, i) => assert.deepEqual(r.rows[0], { n: i * 2, who: `c${i % 3}` }));
  });

  test('when a client is inside a transaction, then another client waits for it and never runs inside it', async () => {
    const a = single();
    const b = single();
    try {
      await a.raw('set search_path to svc_a');
      await b.raw('set search_path to svc_a');
      const before = toCount((await a('notes').count({ c: '*' }))[0]!.c);
      const trx = await a.transaction();
      await trx('notes').insert({ text: 'rolled back' });
      const insert = b('notes').insert({ text: 'kept' }); // queued behind the transaction
      const done = insert.then(() => 'inserted');
      await until(() => server.waiting === 1, { what: 'the second client waiting' });
      await trx.rollback();
      assert.equal(await done, 'inserted');
      const texts = (await a('notes').select('text').orderBy('id')).map((r) => r.text);
      assert.equal(texts.length, before + 1);
      assert.equal(texts.at(-1), 'kept', "the rollback undid only the transaction's own row");
    } finally {
      await a.destroy();
      await b.destroy();
    }
  });

  test('when a client leaves in the middle of a transaction, then it is rolled back and the others go on', async () => {
    const b = await open('svc-b');
    const a = new pg.Client({ connectionString: url });
    a.on('error', () => undefined); // its connection is cut below
    await a.connect();
    await a.query('set search_path to svc_b');
    await a.query('begin');
    await a.query("insert into notes (text) values ('never committed')");
    const count = b.knex('notes').where('text', 'never committed').count({ c: '*' }).then((rows) => rows); // sent now
    await until(() => server.waiting === 1, { what: 'the other client waiting' });
    a.connection.stream.destroy(); // the process holding it died
    assert.equal(toCount((await count)[0]!.c), 0);
  });

  test('when a client idles in its transaction while another waits, then it is rolled back and disconnected', async () => {
    const b = await open('svc-c');
    const a = new pg.Client({ connectionString: url });
    const ended = new Promise<Error>((resolve) => a.once('error', resolve));
    await a.connect();
    await a.query('set search_path to svc_c');
    await a.query('begin');
    await a.query("insert into notes (text) values ('abandoned')");
    const rows = await b.knex('notes').where('text', 'abandoned').count({ c: '*' });
    assert.equal(toCount(rows[0]!.c), 0, 'the waiting client ran once the idle transaction was rolled back');
    assert.match((await ended).message, /idle-in-transaction timeout/);
    await a.end().catch(() => undefined);
  });

  test('when a statement fails, then its client can go on and the others are not affected', async () => {
    const a = await open('svc-a');
    await assert.rejects(a.knex.raw('select nosuch from notes'), /column "nosuch" does not exist/);
    await assert.rejects(a.knex.transaction(async (trx) => trx.raw('select 1/0')), /division by zero/);
    assert.equal((await a.knex.raw('select 1 as one')).rows[0].one, 1);
  });

  test('when a client gives a wrong password, then it is refused', async () => {
    const wrong = new URL(url);
    wrong.password = 'not-the-password';
    const c = new pg.Client({ connectionString: wrong.toString() });
    await assert.rejects(c.connect(), /password authentication failed/);
  });

  test('when the socket file is looked at, then only its owner may open it', () => {
    assert.equal(fs.statSync(embeddedSocketPath(dataDir)).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.join(dataDir, 'database')).mode & 0o777, 0o700);
  });
});

test('searchPathSet reads only a lone set search_path statement', () => {
  assert.equal(searchPathSet('set search_path to "run"'), '"run"');
  assert.equal(searchPathSet('SET search_path = a, b;'), 'a, b');
  assert.equal(searchPathSet('set search_path to a; select 1'), undefined);
  assert.equal(searchPathSet('select 1'), undefined);
});

test('lastReadyStatus reads the last ReadyForQuery of a reply', () => {
  const z = (s: string) => Buffer.concat([Buffer.from('Z'), Buffer.from([0, 0, 0, 5]), Buffer.from(s)]);
  const c = Buffer.concat([Buffer.from('C'), Buffer.from([0, 0, 0, 10]), Buffer.from('BEGIN\0')]);
  assert.equal(lastReadyStatus(Buffer.concat([c, z('T')])), 'T');
  assert.equal(lastReadyStatus(Buffer.concat([z('I'), c, z('E')])), 'E');
  assert.equal(lastReadyStatus(c), undefined);
});
