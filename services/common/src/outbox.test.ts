/**
 * The webhook outbox relay, on both database drivers: rows go to the webhooks service oldest
 * first and are deleted only once it took them; a send that fails leaves them for the next pass;
 * and while the webhooks service is slow to answer, the service's own queries are not held up.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { RecordedEvent } from '../../../gen/ats/webhooks/v1/webhooks.js';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { openDatabase, type Database } from './db.js';
import { createLogger } from './logger.js';
import { OutboxRelay, outboxMigration, recordOutboxEvent } from './outbox.js';

const logger = createLogger('test', process.env.TEST_LOG ?? 'silent');

for (const driver of await drivers()) {
  describe(`the outbox relay on ${driver.name}`, () => {
    let db: Database;
    const dataDir = tempDir('outbox');
    before(async () => {
      db = await openDatabase({ service: 'outbox-test', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations: [outboxMigration('20261202000000_webhook_outbox')] });
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    test('when the webhooks service is slow to take a batch, then the service’s queries go on meanwhile; the rows go in order and leave the table only once taken, a failed send leaving them for the next pass', async () => {
      const batches: RecordedEvent[][] = [];
      let release = () => {};
      let fail = true;
      const relay = new OutboxRelay({
        knex: db.knex,
        driver: db.driver,
        service: `outbox-test-${driver.name}`,
        logger,
        pollMs: 50,
        send: async (events) => {
          if (fail) {
            fail = false;
            throw new Error('webhooks service unavailable');
          }
          batches.push(events);
          if (batches.length === 1) await new Promise<void>((r) => (release = r));
        },
      });
      for (const n of [1, 2, 3]) await recordOutboxEvent(db.knex, { projectId: 'prj_1', type: 'run.queued', orderingKey: 'run_1', data: { n } });
      relay.start();
      try {
        await until(() => batches.length === 1, { what: 'a batch handed over (after the failed one)' });
        // The webhooks service holds the batch: a query of the service itself still answers.
        const counted = await Promise.race([
          db.knex('webhook_outbox').count({ n: '*' }).first(),
          new Promise((_, reject) => setTimeout(() => reject(new Error('a query waited for the send')), 2000)),
        ]);
        assert.equal(Number((counted as { n: string }).n), 3, 'not deleted before the webhooks service took them');
        release();
        await until(async () => Number((await db.knex('webhook_outbox').count({ n: '*' }).first())?.n) === 0, { what: 'the rows deleted once taken' });
        assert.deepEqual(batches[0]!.map((e) => JSON.parse(e.dataJson).n), [1, 2, 3], 'oldest first');
        assert.deepEqual(batches[0]!.map((e) => e.type), ['run.queued', 'run.queued', 'run.queued']);
      } finally {
        release();
        await relay.stop();
      }
    });
  });
}
