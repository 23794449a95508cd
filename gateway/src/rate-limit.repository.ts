/**
 * Token buckets per API key, in the gateway's database so that every replica draws on the same
 * buckets. One statement per take: an upsert that refills the bucket for the time elapsed and
 * takes a token only if one is there (the row lock orders racing replicas).
 */
import type { Knex, Migration } from '../../services/common/src/db.js';

export const rateLimitMigration: Migration = {
  name: '20261125000002_rate_limit_buckets',
  async up(knex) {
    await knex.schema.createTable('rate_limit_buckets', (t) => {
      t.string('key_id').notNullable();
      t.string('bucket', 16).notNullable();
      t.double('tokens').notNullable();
      t.timestamp('updated_at', { useTz: true }).notNullable();
      t.primary(['key_id', 'bucket']);
    });
    // Counters need no durability: unlogged, a take waits for no WAL flush (a crash merely refills the buckets).
    await knex.raw('alter table rate_limit_buckets set unlogged');
  },
};

/** A bucket: holds up to `capacity` tokens and gains `perSecond` a second. */
export interface Bucket {
  name: string;
  capacity: number;
  perSecond: number;
}

export class RateLimitRepository {
  readonly #knex: Knex;
  constructor(knex: Knex) {
    this.#knex = knex;
  }

  /**
   * Takes one token from `keyId`'s `bucket`. Resolves to 0 when taken, otherwise to the seconds
   * until a token is there.
   */
  async take(keyId: string, bucket: Bucket): Promise<number> {
    const refill = `least(?::float8, rate_limit_buckets.tokens + extract(epoch from now() - rate_limit_buckets.updated_at)::float8 * ?::float8)`;
    const { rows } = await this.#knex.raw(
      `insert into rate_limit_buckets (key_id, bucket, tokens, updated_at) values (?, ?, ?::float8 - 1, now())
       on conflict (key_id, bucket) do update set tokens = ${refill} - 1, updated_at = now()
       where ${refill} >= 1
       returning tokens`,
      [keyId, bucket.name, bucket.capacity, bucket.capacity, bucket.perSecond, bucket.capacity, bucket.perSecond],
    );
    if (rows.length) return 0;
    const row = await this.#knex('rate_limit_buckets')
      .where({ key_id: keyId, bucket: bucket.name })
      .first(this.#knex.raw(`least(?::float8, tokens + extract(epoch from now() - updated_at)::float8 * ?::float8) as tokens`, [bucket.capacity, bucket.perSecond]));
    const missing = 1 - Number(row?.tokens ?? 0);
    return Math.max(missing / bucket.perSecond, 0.001);
  }
}
