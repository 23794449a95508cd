/**
 * The webhooks service's tables and the only code that knows them: endpoints (with their signing
 * secrets), the events the services recorded, and deliveries (one per event and endpoint, with
 * their attempts). Deliveries are claimed with FOR UPDATE SKIP LOCKED and a lease, so any number
 * of replicas share the work, and one that dies mid-delivery leaves it to be claimed again.
 */
import type { Knex, Migration } from '../../common/src/db.js';
import { newId } from '../../common/src/ids.js';
import { keysetPage, newestFirst, type Page } from '../../common/src/keyset.js';

const newDeliveryId = () => newId('dlv');

export const migrations: Migration[] = [
  {
    name: '20261202000000_endpoints_events_deliveries',
    async up(knex) {
      await knex.schema.createTable('endpoints', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.text('url').notNullable();
        t.text('event_types').notNullable();
        t.boolean('enabled').notNullable();
        t.text('description').notNullable();
        t.string('secret').notNullable();
        t.string('previous_secret');
        t.timestamp('previous_secret_expires_at', { useTz: true });
        t.text('disabled_reason');
        t.timestamp('disabled_at', { useTz: true });
        t.timestamp('failing_since', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['project_id', 'created_at']);
      });
      await knex.schema.createTable('events', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('type').notNullable();
        t.string('ordering_key').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.text('body').notNullable();
      });
      await knex.schema.createTable('deliveries', (t) => {
        t.bigIncrements('seq').primary();
        t.string('id').notNullable().unique();
        t.string('endpoint_id').notNullable();
        t.string('event_id').notNullable();
        t.string('event_type').notNullable();
        t.string('ordering_key').notNullable();
        t.string('status', 10).notNullable();
        t.integer('attempts').notNullable().defaultTo(0);
        t.integer('last_status_code');
        t.text('last_error');
        t.integer('last_latency_ms');
        t.timestamp('last_attempt_at', { useTz: true });
        t.timestamp('next_attempt_at', { useTz: true });
        t.timestamp('locked_until', { useTz: true });
        t.timestamp('delivered_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['status', 'next_attempt_at']);
        t.index(['endpoint_id', 'ordering_key', 'seq']);
        t.index(['endpoint_id', 'created_at']);
      });
    },
  },
];

export interface EndpointRow {
  id: string;
  projectId: string;
  url: string;
  eventTypes: string[];
  enabled: boolean;
  description: string;
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: string | null;
  disabledReason: string | null;
  disabledAt: string | null;
  failingSince: string | null;
  createdAt: string;
  updatedAt: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface DeliveryRow {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  orderingKey: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastLatencyMs: number | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  createdAt: string;
}

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery extends DeliveryRow {
  url: string;
  body: string;
  secrets: string[];
}

export interface EventInput {
  id: string;
  projectId: string;
  type: string;
  orderingKey: string;
  createdAt: string;
  /** The webhook body: {id, type, createdAt, data}. */
  body: string;
}

const iso = (v: unknown): string | null => (v == null ? null : new Date(v as string).toISOString());

function endpoint(r: any): EndpointRow {
  return {
    id: r.id,
    projectId: r.project_id,
    url: r.url,
    eventTypes: JSON.parse(r.event_types),
    enabled: Boolean(r.enabled),
    description: r.description,
    secret: r.secret,
    previousSecret: r.previous_secret ?? null,
    previousSecretExpiresAt: iso(r.previous_secret_expires_at),
    disabledReason: r.disabled_reason ?? null,
    disabledAt: iso(r.disabled_at),
    failingSince: iso(r.failing_since),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  };
}

function delivery(r: any): DeliveryRow {
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    eventType: r.event_type,
    orderingKey: r.ordering_key,
    status: r.status,
    attempts: Number(r.attempts),
    lastStatusCode: r.last_status_code ?? null,
    lastError: r.last_error ?? null,
    lastLatencyMs: r.last_latency_ms ?? null,
    lastAttemptAt: iso(r.last_attempt_at),
    nextAttemptAt: r.status === 'pending' ? iso(r.next_attempt_at) : null,
    deliveredAt: iso(r.delivered_at),
    createdAt: iso(r.created_at)!,
  };
}

/** What one attempt came to. */
export interface AttemptOutcome {
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  at: Date;
}

export class WebhookRepository {
  readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  // ---- endpoints ----

  async insertEndpoint(e: { id: string; projectId: string; url: string; eventTypes: string[]; enabled: boolean; description: string; secret: string }): Promise<EndpointRow> {
    const now = new Date().toISOString();
    const [row] = await this.knex('endpoints')
      .insert({ id: e.id, project_id: e.projectId, url: e.url, event_types: JSON.stringify(e.eventTypes), enabled: e.enabled, description: e.description, secret: e.secret, created_at: now, updated_at: now })
      .returning('*');
    return endpoint(row);
  }

  async endpoint(projectId: string, id: string): Promise<EndpointRow | undefined> {
    const r = await this.knex('endpoints').where({ project_id: projectId, id }).first();
    return r ? endpoint(r) : undefined;
  }

  async endpoints(projectId: string, limit: number, cursor: string | undefined): Promise<Page<EndpointRow>> {
    return keysetPage(this.knex, this.knex('endpoints').select('*').where({ project_id: projectId }), { ...newestFirst(), limit, cursor, map: endpoint });
  }

  async updateEndpoint(projectId: string, id: string, patch: { url?: string; eventTypes?: string[]; description?: string; enabled?: boolean }): Promise<EndpointRow | undefined> {
    const set: Record<string, unknown> = { updated_at: new Date().toISOString() };
    if (patch.url !== undefined) set.url = patch.url;
    if (patch.eventTypes !== undefined) set.event_types = JSON.stringify(patch.eventTypes);
    if (patch.description !== undefined) set.description = patch.description;
    if (patch.enabled !== undefined) {
      set.enabled = patch.enabled;
      // Enabled again by its owner: the note of why it was disabled, and its failing streak, go.
      if (patch.enabled) Object.assign(set, { disabled_reason: null, disabled_at: null, failing_since: null });
    }
    const [row] = await this.knex('endpoints').where({ project_id: projectId, id }).update(set, ['*']);
    return row ? endpoint(row) : undefined;
  }

  async rotateSecret(projectId: string, id: string, secret: string, overlapSeconds: number): Promise<EndpointRow | undefined> {
    const now = new Date();
    const [row] = await this.knex('endpoints')
      .where({ project_id: projectId, id })
      .update(
        {
          previous_secret: overlapSeconds > 0 ? this.knex.ref('secret') : null,
          previous_secret_expires_at: overlapSeconds > 0 ? new Date(now.getTime() + overlapSeconds * 1000).toISOString() : null,
          secret,
          updated_at: now.toISOString(),
        },
        ['*'],
      );
    return row ? endpoint(row) : undefined;
  }

  /** Deletes the endpoint and its deliveries; false when there was none. */
  async deleteEndpoint(projectId: string, id: string): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const n = await trx('endpoints').where({ project_id: projectId, id }).del();
      if (n) await trx('deliveries').where({ endpoint_id: id }).del();
      return n > 0;
    });
  }

  // ---- events ----

  /**
   * Stores events not seen before (by id) and a pending delivery of each to every enabled endpoint
   * of its project that wants its type; returns how many were new.
   */
  async recordEvents(events: EventInput[]): Promise<number> {
    if (!events.length) return 0;
    return this.knex.transaction(async (trx) => {
      let recorded = 0;
      const now = new Date().toISOString();
      const endpointsOf = new Map<string, EndpointRow[]>();
      for (const e of events) {
        const inserted = await trx('events')
          .insert({ id: e.id, project_id: e.projectId, type: e.type, ordering_key: e.orderingKey, created_at: e.createdAt, body: e.body })
          .onConflict('id')
          .ignore()
          .returning('id');
        if (!inserted.length) continue;
        recorded++;
        if (!endpointsOf.has(e.projectId)) endpointsOf.set(e.projectId, (await trx('endpoints').where({ project_id: e.projectId, enabled: true })).map(endpoint));
        const targets = endpointsOf.get(e.projectId)!.filter((x) => !x.eventTypes.length || x.eventTypes.includes(e.type));
        if (targets.length) await trx('deliveries').insert(targets.map((x) => this.#pending(x.id, e, now)));
      }
      return recorded;
    });
  }

  #pending(endpointId: string, e: { id: string; type: string; orderingKey: string }, now: string) {
    return { id: newDeliveryId(), endpoint_id: endpointId, event_id: e.id, event_type: e.type, ordering_key: e.orderingKey, status: 'pending', next_attempt_at: now, created_at: now };
  }

  /** A new pending delivery of an event to one endpoint (a redelivery, a test ping). */
  async addDelivery(endpointId: string, e: EventInput): Promise<DeliveryRow> {
    return this.knex.transaction(async (trx) => {
      await trx('events').insert({ id: e.id, project_id: e.projectId, type: e.type, ordering_key: e.orderingKey, created_at: e.createdAt, body: e.body }).onConflict('id').ignore();
      const [row] = await trx('deliveries').insert(this.#pending(endpointId, e, new Date().toISOString())).returning('*');
      return delivery(row);
    });
  }

  async event(id: string): Promise<EventInput | undefined> {
    const r = await this.knex('events').where({ id }).first();
    return r ? { id: r.id, projectId: r.project_id, type: r.type, orderingKey: r.ordering_key, createdAt: iso(r.created_at)!, body: r.body } : undefined;
  }

  // ---- deliveries ----

  async deliveries(endpointId: string, limit: number, cursor: string | undefined): Promise<Page<DeliveryRow>> {
    return keysetPage(this.knex, this.knex('deliveries').select('*').where({ endpoint_id: endpointId }), { ...newestFirst(), limit, cursor, map: delivery });
  }

  async delivery(endpointId: string, id: string): Promise<DeliveryRow | undefined> {
    const r = await this.knex('deliveries').where({ endpoint_id: endpointId, id }).first();
    return r ? delivery(r) : undefined;
  }

  /**
   * Claims up to `limit` due deliveries for `leaseMs`: pending, due, of an enabled endpoint, not
   * held by another dispatcher, and the oldest pending one of their endpoint and ordering key (so
   * a run's events reach an endpoint in order, a later one waiting while an earlier one retries).
   */
  async claim(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    return this.knex.transaction(async (trx) => {
      const now = new Date();
      const rows = await trx.raw(
        `select d.seq from deliveries d join endpoints e on e.id = d.endpoint_id
          where d.status = 'pending' and d.next_attempt_at <= ? and (d.locked_until is null or d.locked_until < ?) and e.enabled
            and not exists (select 1 from deliveries p where p.endpoint_id = d.endpoint_id and p.ordering_key = d.ordering_key and p.status = 'pending' and p.seq < d.seq)
          order by d.next_attempt_at, d.seq limit ? for update of d skip locked`,
        [now.toISOString(), now.toISOString(), limit],
      );
      const seqs = rows.rows.map((r: { seq: string | number }) => r.seq);
      if (!seqs.length) return [];
      await trx('deliveries').whereIn('seq', seqs).update({ locked_until: new Date(now.getTime() + leaseMs).toISOString() });
      const got = await trx('deliveries as d')
        .join('endpoints as e', 'e.id', 'd.endpoint_id')
        .join('events as v', 'v.id', 'd.event_id')
        .whereIn('d.seq', seqs)
        .orderBy('d.seq')
        .select('d.*', 'e.url', 'e.secret', 'e.previous_secret', 'e.previous_secret_expires_at', 'v.body');
      return got.map((r: any) => {
        const previous = r.previous_secret && r.previous_secret_expires_at && new Date(r.previous_secret_expires_at) > now ? [r.previous_secret as string] : [];
        return { ...delivery(r), url: r.url, body: r.body, secrets: [r.secret, ...previous] };
      });
    });
  }

  /**
   * Records an attempt's outcome. `next`: when to try again (undefined = done: `succeeded` on a
   * 2xx, else `failed`). `disable`: a reason to disable the endpoint. Returns false when the
   * delivery was deleted meanwhile.
   */
  async settle(d: ClaimedDelivery, o: AttemptOutcome, next: Date | undefined, disable?: string): Promise<void> {
    const ok = o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;
    await this.knex.transaction(async (trx) => {
      await trx('deliveries')
        .where({ id: d.id })
        .update({
          status: ok ? 'succeeded' : next ? 'pending' : 'failed',
          attempts: trx.raw('attempts + 1'),
          last_status_code: o.statusCode,
          last_error: o.error,
          last_latency_ms: o.latencyMs,
          last_attempt_at: o.at.toISOString(),
          next_attempt_at: next ? next.toISOString() : null,
          locked_until: null,
          ...(ok ? { delivered_at: new Date().toISOString() } : {}),
        });
      const at = o.at.toISOString();
      if (ok) await trx('endpoints').where({ id: d.endpointId }).whereNotNull('failing_since').update({ failing_since: null });
      else await trx('endpoints').where({ id: d.endpointId }).whereNull('failing_since').update({ failing_since: at });
      if (disable) await trx('endpoints').where({ id: d.endpointId, enabled: true }).update({ enabled: false, disabled_reason: disable, disabled_at: at, updated_at: at });
    });
  }

  /** When the endpoint's unbroken run of failures began, if it is failing. */
  async failingSince(endpointId: string): Promise<Date | undefined> {
    const r = await this.knex('endpoints').where({ id: endpointId }).first('failing_since');
    return r?.failing_since ? new Date(r.failing_since) : undefined;
  }

  /** The earliest time a pending delivery falls due (for the dispatcher's next wake-up). */
  async nextDue(): Promise<Date | undefined> {
    const r = await this.knex('deliveries').where({ status: 'pending' }).min({ at: 'next_attempt_at' }).first();
    return r?.at ? new Date(r.at) : undefined;
  }
}
