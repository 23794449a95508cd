/**
 * The webhook outbox of a service: an event is a row written in the same transaction as the
 * change it reports (a run's status, a browser row, an output file), so a crash can lose neither
 * the change without its event nor the event without its change. A relay hands the rows, in
 * order, to the webhooks service (RecordEvents, which ignores an id it has seen) and deletes them
 * only after it accepted them: at least once, nothing lost while the webhooks service is down.
 */
import { EventEmitter } from 'node:events';
import type { RecordedEvent } from '../../../gen/ats/webhooks/v1/webhooks.js';
import type { Knex, Migration } from './db.js';
import { newId } from './ids.js';
import type { Logger } from './logger.js';
import { WakeLoop } from './wake-loop.js';
import type { WebhookEventType } from './webhook-events.js';

const TABLE = 'webhook_outbox';

/** The migration that creates a service's outbox table. */
export function outboxMigration(name: string): Migration {
  return {
    name,
    async up(knex) {
      await knex.schema.createTable(TABLE, (t) => {
        t.bigIncrements('seq').primary();
        t.string('id').notNullable();
        t.string('project_id').notNullable();
        t.string('type').notNullable();
        t.string('ordering_key').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.text('data').notNullable();
      });
    },
  };
}

/** Tells this process's relay that rows were committed (it need not wait for its poll). */
const written = new EventEmitter();

export interface OutboxEvent {
  projectId: string;
  type: WebhookEventType;
  /** Events of one key (a run id) reach an endpoint in the order they were recorded. */
  orderingKey: string;
  /** The resource as the REST API returns it. */
  data: object;
}

/**
 * Records an event in `trx`, the transaction that makes the change it reports. A plain knex
 * (no transaction) commits the row at once.
 */
export async function recordOutboxEvent(trx: Knex | Knex.Transaction, e: OutboxEvent): Promise<void> {
  await trx(TABLE).insert({ id: newId('evt'), project_id: e.projectId, type: e.type, ordering_key: e.orderingKey, created_at: new Date().toISOString(), data: JSON.stringify(e.data) });
  const execution = (trx as Partial<Knex.Transaction>).executionPromise;
  if (execution) execution.then(() => written.emit('written'), () => undefined);
  else written.emit('written');
}

export interface OutboxRelayOptions {
  knex: Knex;
  /**
   * 'pg': replicas may share the table, so a pass sends under an advisory lock held by its
   * transaction. 'pglite': one process on one connection, so no lock and no transaction: one held
   * open across the send would stall every query of the service while the webhooks service is slow.
   */
  driver: 'pg' | 'pglite';
  /** Names the lock that lets one relay of the service's replicas send at a time (so order holds). */
  service: string;
  /** Hands events to the webhooks service; resolves once it stored them. */
  send(events: RecordedEvent[]): Promise<void>;
  logger: Logger;
  pollMs: number;
  batch?: number;
}

/** Moves outbox rows to the webhooks service, oldest first; woken by commits, polling as a fallback. */
export class OutboxRelay {
  readonly #o: OutboxRelayOptions;
  readonly #loop: WakeLoop;
  readonly #onWritten = () => this.#loop.wake();

  constructor(o: OutboxRelayOptions) {
    this.#o = o;
    // The rows stay on a failure; the next pass (the poll) sends them again.
    this.#loop = new WakeLoop(() => this.#pass(), o.pollMs, (err) => o.logger.warn({ err: err.message }, 'webhook events not handed over yet; will retry'));
  }

  start(): void {
    written.on('written', this.#onWritten);
    this.#loop.wake();
  }

  async #pass(): Promise<void> {
    const batch = this.#o.batch ?? 100;
    for (;;) {
      const sent =
        this.#o.driver === 'pglite'
          ? await this.#sendOldest(this.#o.knex, batch)
          : await this.#o.knex.transaction(async (trx) => {
              // One sender per service: two replicas sending batches side by side could swap a run's events.
              const lock = await trx.raw('select pg_try_advisory_xact_lock(hashtext(?)) as ok', [`ats.webhook-outbox.${this.#o.service}`]);
              return lock.rows[0]?.ok ? this.#sendOldest(trx, batch) : 0;
            });
      if (sent < batch) return;
    }
  }

  /** Sends the oldest rows and deletes them once the webhooks service took them; how many it sent. */
  async #sendOldest(k: Knex | Knex.Transaction, batch: number): Promise<number> {
    const rows = await k(TABLE).orderBy('seq').limit(batch);
    if (!rows.length) return 0;
    await this.#o.send(rows.map(toRecorded));
    await k(TABLE).whereIn('seq', rows.map((r) => r.seq)).del();
    return rows.length;
  }

  async stop(): Promise<void> {
    written.off('written', this.#onWritten);
    await this.#loop.stop();
  }
}

function toRecorded(r: { seq: string | number; id: string; project_id: string; type: string; ordering_key: string; created_at: unknown; data: string }): RecordedEvent {
  return { id: r.id, projectId: r.project_id, type: r.type, orderingKey: r.ordering_key, sequence: Number(r.seq), createdAt: new Date(r.created_at as string).toISOString(), dataJson: r.data };
}
