/**
 * Idempotency keys, in the gateway's database so that a retry is recognised after a restart and
 * on any replica. A request claims its key by inserting the row first (the primary key decides
 * between racing requests, wherever they run); the winner stores its response, which every later
 * request with the same key and the same request hash gets back.
 */
import type { Knex, Migration } from '../../services/common/src/db.js';

export const idempotencyMigration: Migration = {
  name: '20261125000001_idempotency_keys',
  async up(knex) {
    await knex.schema.createTable('idempotency_keys', (t) => {
      t.string('project_id').notNullable();
      t.string('idem_key', 255).notNullable();
      t.string('request_hash', 64).notNullable();
      t.integer('response_status');
      t.text('response_body');
      // While the first request works: a claim older than the lock time is abandoned (its gateway died).
      t.timestamp('locked_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.primary(['project_id', 'idem_key']);
      t.index(['created_at']);
    });
  },
};

/** The stored first response. */
export interface StoredResponse {
  status: number;
  /** The JSON body as sent; null for a body-less reply (204). */
  body: string | null;
}

/** What claiming a key found. */
export type Claim =
  | { kind: 'claimed' }
  | { kind: 'replay'; response: StoredResponse }
  /** The key was used for another request (method, path or body). */
  | { kind: 'mismatch' }
  /** The first request with this key is still being worked on. */
  | { kind: 'in-progress' };

export interface IdempotencyTimes {
  /** How long a key is remembered. */
  retentionSeconds: number;
  /** After how long an unfinished claim counts as abandoned and may be taken over. */
  lockSeconds: number;
}

export class IdempotencyRepository {
  readonly #knex: Knex;
  readonly #times: IdempotencyTimes;
  #lastPurge = 0;

  constructor(knex: Knex, times: IdempotencyTimes) {
    this.#knex = knex;
    this.#times = times;
  }

  /** Claims `key` for a request whose hash is `hash`, or says what an earlier request with it left. */
  async claim(projectId: string, key: string, hash: string): Promise<Claim> {
    this.#purgeNowAndThen(projectId);
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = await this.#knex('idempotency_keys')
        .insert({ project_id: projectId, idem_key: key, request_hash: hash })
        .onConflict(['project_id', 'idem_key'])
        .ignore()
        .returning('idem_key');
      if (inserted.length) return { kind: 'claimed' };
      const row = await this.#knex('idempotency_keys')
        .where({ project_id: projectId, idem_key: key })
        .first(
          'request_hash',
          'response_status',
          'response_body',
          this.#knex.raw(`created_at < now() - make_interval(secs => ?) as expired`, [this.#times.retentionSeconds]),
          this.#knex.raw(`locked_at < now() - make_interval(secs => ?) as stale`, [this.#times.lockSeconds]),
        );
      if (!row) continue; // deleted between the two statements: claim again
      if (row.expired) {
        await this.#expired(projectId).where({ idem_key: key }).delete();
        continue;
      }
      if (row.request_hash !== hash) return { kind: 'mismatch' };
      if (row.response_status != null) return { kind: 'replay', response: { status: row.response_status as number, body: (row.response_body as string | null) ?? null } };
      if (row.stale) {
        // The first request's gateway died before it answered: this request takes over, once.
        const taken = await this.#knex('idempotency_keys')
          .where({ project_id: projectId, idem_key: key })
          .whereNull('response_status')
          .andWhere('locked_at', '<', this.#knex.raw(`now() - make_interval(secs => ?)`, [this.#times.lockSeconds]))
          .update({ locked_at: this.#knex.fn.now() });
        if (taken) return { kind: 'claimed' };
      }
      return { kind: 'in-progress' };
    }
    return { kind: 'in-progress' };
  }

  /** Stores the response of a claimed key. */
  async complete(projectId: string, key: string, response: StoredResponse): Promise<void> {
    await this.#knex('idempotency_keys').where({ project_id: projectId, idem_key: key }).update({ response_status: response.status, response_body: response.body });
  }

  /** Gives a claimed key up (the request failed in a way a retry may fix), so the next request with it does the work. */
  async release(projectId: string, key: string): Promise<void> {
    await this.#knex('idempotency_keys').where({ project_id: projectId, idem_key: key }).whereNull('response_status').delete();
  }

  #expired(projectId: string): Knex.QueryBuilder {
    return this.#knex('idempotency_keys')
      .where({ project_id: projectId })
      .andWhere('created_at', '<', this.#knex.raw(`now() - make_interval(secs => ?)`, [this.#times.retentionSeconds]));
  }

  /** Drops a project's expired keys at most once a minute per process, off the request's path. */
  #purgeNowAndThen(projectId: string): void {
    if (Date.now() - this.#lastPurge < 60_000) return;
    this.#lastPurge = Date.now();
    this.#expired(projectId)
      .delete()
      .catch(() => undefined); // the next purge retries; a stale row is also ignored when read
  }
}
