/**
 * The pool instances table: which pool processes are alive and how their peers reach them. The
 * only code that knows that table; reaping a dead instance also stops its browsers, in the same
 * transaction, so that two replicas reaping at once stop each browser once.
 */
import type { Knex } from '../../common/src/db.js';
import { browser, type BrowserChangeHook, type BrowserRow } from './browser.repository.js';

/** A live (or not yet reaped) pool instance. */
export interface InstanceRow {
  id: string;
  /** host:port of its gRPC server as other replicas reach it. */
  grpcAddr: string;
  /** ws:// base of its CDP proxy as other replicas reach it. */
  cdpUrl: string;
  /** Shutting down: it takes no new browsers. */
  draining: boolean;
  startedAt: string;
  heartbeatAt: string;
}

/** Where an instance is reached. */
export interface InstanceAddress {
  id: string;
  grpcAddr: string;
  cdpUrl: string;
}

/** What one reaping pass took: the instances found dead and the browsers it stopped. */
export interface Reaped {
  instances: string[];
  browsers: BrowserRow[];
}

const iso = (v: unknown): string => new Date(v as string).toISOString();

function instance(r: any): InstanceRow {
  return {
    id: r.id,
    grpcAddr: r.grpc_addr,
    cdpUrl: r.cdp_url,
    draining: !!r.draining,
    startedAt: iso(r.started_at),
    heartbeatAt: iso(r.heartbeat_at),
  };
}

/** Queries of the instances table. */
export class InstanceRepository {
  readonly #knex: Knex;
  readonly #onChange: BrowserChangeHook | undefined;

  /** `onChange` records each reaped browser's `browser.stopped` in the reaping transaction (the webhook outbox). */
  constructor(knex: Knex, onChange?: BrowserChangeHook) {
    this.#knex = knex;
    this.#onChange = onChange;
  }

  /** Registers an instance, or takes its row over again after a restart under the same id (heartbeat renewed, not draining). */
  async register(a: InstanceAddress, at: Date): Promise<InstanceRow> {
    const [r] = await this.#knex('instances')
      .insert({ id: a.id, grpc_addr: a.grpcAddr, cdp_url: a.cdpUrl, draining: false, started_at: at, heartbeat_at: at })
      .onConflict('id')
      .merge()
      .returning('*');
    return instance(r);
  }

  /** Renews an instance's heartbeat; false when its row is gone (it was found dead and reaped meanwhile). */
  async heartbeat(id: string, at: Date): Promise<boolean> {
    return (await this.#knex('instances').where({ id }).update({ heartbeat_at: at })) > 0;
  }

  /** Marks an instance as draining: peers send it no new browsers. */
  async setDraining(id: string): Promise<void> {
    await this.#knex('instances').where({ id }).update({ draining: true });
  }

  /** Removes an instance that shut down (its browsers are stopped already). */
  async deregister(id: string): Promise<void> {
    await this.#knex('instances').where({ id }).delete();
  }

  async all(): Promise<InstanceRow[]> {
    return (await this.#knex('instances').orderBy('id')).map(instance);
  }

  /**
   * Reaps one instance found dead before its heartbeat expired (its address refuses connections),
   * if its row still holds the heartbeat `seenAt` it was judged by: one that beat again meanwhile
   * (alive after all, or restarted under its id) is left alone. Its active browsers are marked
   * stopped (`owner_lost`) in the same transaction, once, as `reapExpired` does.
   */
  async reapDead(id: string, seenAt: Date, at: Date): Promise<Reaped> {
    return this.#knex.transaction(async (trx) => {
      const gone = (await trx('instances').where({ id, heartbeat_at: seenAt }).delete().returning('id')).map((r: { id: string }) => r.id);
      if (!gone.length) return { instances: [], browsers: [] };
      const rows = await trx('browsers').where({ status: 'active', instance_id: id }).update({ status: 'stopped', stopped_at: at, stop_reason: 'owner_lost' }).returning('*');
      const browsers = rows.map(browser);
      if (this.#onChange) for (const b of browsers) await this.#onChange(trx, b, 'browser.stopped');
      return { instances: gone, browsers };
    });
  }

  /**
   * Reaps every instance other than `self` whose heartbeat is older than `expiredBefore`, and in the
   * same transaction marks stopped (`owner_lost`, at `at`) the active browsers they owned, plus
   * active browsers older than `expiredBefore` whose owner has no row at all (it was reaped, or
   * never registered). Deleting a row is what claims it: a second reaper running at once waits on
   * the row, then finds it gone, and its update finds those browsers stopped already, so each
   * browser is reaped (and announced) once.
   */
  async reapExpired(self: string, expiredBefore: Date, at: Date): Promise<Reaped> {
    return this.#knex.transaction(async (trx) => {
      const gone = (await trx('instances').where('heartbeat_at', '<', expiredBefore).whereNot({ id: self }).delete().returning('id')).map((r: { id: string }) => r.id);
      const rows = await trx('browsers')
        .where({ status: 'active' })
        .whereNot({ instance_id: self })
        .andWhere((w) => {
          if (gone.length) w.whereIn('instance_id', gone);
          w.orWhere((o) => o.where('created_at', '<', expiredBefore).whereNotExists(trx('instances').select(trx.raw('1')).whereRaw('instances.id = browsers.instance_id')));
        })
        .update({ status: 'stopped', stopped_at: at, stop_reason: 'owner_lost' })
        .returning('*');
      const browsers = rows.map(browser);
      if (this.#onChange) for (const b of browsers) await this.#onChange(trx, b, 'browser.stopped');
      return { instances: gone, browsers };
    });
  }
}
