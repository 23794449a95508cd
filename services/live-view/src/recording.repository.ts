/**
 * The recordings tables and the only code that knows them. A recording row follows its browser:
 * `recording` while it runs, `finalizing` once it stopped until the MP4 is stored, then `ready`
 * (or `empty` when no frame ever came, `failed` when it could not be stored).
 *
 * An unfinished recording is held by one process through a lease: `instance_id` names the
 * holder's instance, `lease_nonce` the holder's process, `lease_until` when the lease runs out
 * unless renewed. Whoever finds a lease run out may take it over (one taker wins); every change a
 * holder makes to a recording or its parts first checks, under a row lock, that it still holds
 * it, so a holder that was taken over (paused, cut off) cannot write over its successor.
 *
 * Parts are the pieces of the video, each encoded by one ffmpeg child: `file` is where its writer
 * (`instance_id`) encodes it, `object_key` where it is stored once finished (`stored_at`), with
 * the length it has. A part never stored was lost with its writer.
 *
 * `instances` says which processes are alive (a heartbeat per instance id), so that a second
 * process started with the same id is refused and scratch left by long-dead instances can go.
 */
import type { Knex, Migration } from '../../common/src/db.js';
import { outboxMigration } from '../../common/src/outbox.js';

export const migrations: Migration[] = [
  {
    name: '20261122030000_recordings',
    async up(knex) {
      await knex.schema.createTable('recordings', (t) => {
        t.string('browser_id').primary();
        t.string('project_id').notNullable();
        t.string('instance_id').notNullable();
        t.string('state', 16).notNullable();
        // Times of the pool's clock (the frames' clock), in ms since the epoch.
        t.bigInteger('started_at_ms').notNullable();
        t.bigInteger('stopped_at_ms');
        t.integer('width');
        t.integer('height');
        t.string('object_key', 512);
        t.bigInteger('size_bytes');
        t.integer('duration_ms');
        t.integer('attempts').notNullable().defaultTo(0);
        t.text('error');
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(['instance_id', 'state']);
      });
      await knex.schema.createTable('recording_parts', (t) => {
        t.string('browser_id').notNullable();
        t.integer('seq').notNullable();
        // The part's first frame shows this moment; each frame lasts 1/fps.
        t.bigInteger('start_ms').notNullable();
        t.integer('fps').notNullable();
        t.string('file', 1024).notNullable();
        t.primary(['browser_id', 'seq']);
      });
    },
  },
  {
    name: '20261201000000_recording_leases',
    async up(knex) {
      // Rows of before have no lease: they count as run out, so any replica takes them over.
      await knex.schema.alterTable('recordings', (t) => {
        t.string('lease_nonce', 64);
        t.timestamp('lease_until', { useTz: true });
        t.index(['state', 'lease_until']);
      });
      await knex.schema.alterTable('recording_parts', (t) => {
        t.string('instance_id', 64);
        t.string('object_key', 512);
        t.integer('duration_ms');
        t.bigInteger('size_bytes');
        t.timestamp('stored_at', { useTz: true });
      });
      await knex.schema.createTable('instances', (t) => {
        t.string('instance_id', 64).primary();
        t.string('nonce', 64).notNullable();
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.timestamp('heartbeat_at', { useTz: true }).notNullable();
        // Set when the process stopped cleanly: the next one of this id need not wait to be sure.
        t.timestamp('stopped_at', { useTz: true });
      });
    },
  },
  // recording.ready is written there in the transaction that marks a recording ready.
  outboxMigration('20261202000000_webhook_outbox'),
  {
    // Which process holds an instance id (processIdentity()): a restart on the same host sees at once whether it is gone.
    name: '20261215000000_instance_process',
    async up(knex) {
      await knex.schema.alterTable('instances', (t) => {
        t.string('process', 200);
      });
    },
  },
];

/** What marking a recording ready also writes in its transaction (its webhook event). */
export type ReadyWrite = (trx: Knex.Transaction) => Promise<void>;

export type RecordingStateName = 'recording' | 'finalizing' | 'ready' | 'empty' | 'failed';

/** One process holding leases: its instance id (stable per pod) and a nonce of this process run. */
export interface Holder {
  instanceId: string;
  nonce: string;
}

export interface RecordingRow {
  browserId: string;
  projectId: string;
  /** The instance holding (or that last held) the recording. */
  instanceId: string;
  state: RecordingStateName;
  startedAtMs: number;
  stoppedAtMs: number | null;
  width: number | null;
  height: number | null;
  objectKey: string | null;
  sizeBytes: number | null;
  durationMs: number | null;
  attempts: number;
  error: string | null;
}

/** What GetRecording tells of a recording. */
export type RecordingStatus = Pick<RecordingRow, 'state' | 'projectId' | 'objectKey'>;

export interface PartRow {
  browserId: string;
  seq: number;
  startMs: number;
  fps: number;
  /** Path of the part's file on its writer. */
  file: string;
  /** The instance that encodes (encoded) it; null for parts of before leases. */
  instanceId: string | null;
  /** Where the part is stored once finished. */
  objectKey: string | null;
  /** Set once it is stored: how long its video lasts. */
  durationMs: number | null;
  stored: boolean;
}

export interface InstanceRow {
  instanceId: string;
  nonce: string;
  heartbeatAtMs: number;
  /** It stopped cleanly. */
  stopped: boolean;
  /** The process that registered it (processIdentity()), when it could say. */
  process: string | null;
}

const UNFINISHED: RecordingStateName[] = ['recording', 'finalizing'];

const n = (v: unknown): number => Number(v);
const nOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function recording(r: any): RecordingRow {
  return {
    browserId: r.browser_id,
    projectId: r.project_id,
    instanceId: r.instance_id,
    state: r.state,
    startedAtMs: n(r.started_at_ms),
    stoppedAtMs: nOrNull(r.stopped_at_ms),
    width: nOrNull(r.width),
    height: nOrNull(r.height),
    objectKey: r.object_key,
    sizeBytes: nOrNull(r.size_bytes),
    durationMs: nOrNull(r.duration_ms),
    attempts: n(r.attempts),
    error: r.error,
  };
}

function part(r: any): PartRow {
  return {
    browserId: r.browser_id,
    seq: n(r.seq),
    startMs: n(r.start_ms),
    fps: n(r.fps),
    file: r.file,
    instanceId: r.instance_id ?? null,
    objectKey: r.object_key ?? null,
    durationMs: nOrNull(r.duration_ms),
    stored: r.stored_at !== null && r.stored_at !== undefined,
  };
}

export class RecordingRepository {
  readonly #knex: Knex;
  readonly #now: () => number;

  /** `now`: the clock leases are measured by (tests move it). */
  constructor(knex: Knex, options: { now?: () => number } = {}) {
    this.#knex = knex;
    this.#now = options.now ?? Date.now;
  }

  /** The clock leases and heartbeats are measured by. */
  now(): number {
    return this.#now();
  }

  #iso(offsetMs = 0): string {
    return new Date(this.#now() + offsetMs).toISOString();
  }

  #heldBy(holder: Holder) {
    return { instance_id: holder.instanceId, lease_nonce: holder.nonce };
  }

  /**
   * Runs `fn` only while `holder` holds the recording, with its row locked against a takeover
   * until `fn` is done; undefined when it does not hold it.
   */
  async #asHolder<T>(holder: Holder, browserId: string, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T | undefined> {
    return this.#knex.transaction(async (trx) => {
      const held = await trx('recordings').where({ browser_id: browserId, ...this.#heldBy(holder) }).whereIn('state', UNFINISHED).forShare().first('browser_id');
      return held ? fn(trx) : undefined;
    });
  }

  /** Inserts a `recording` row held by `holder` unless the browser has one; true when this call created it. */
  async claim(r: { browserId: string; projectId: string; startedAtMs: number }, holder: Holder, leaseMs: number): Promise<boolean> {
    const rows = await this.#knex('recordings')
      .insert({ browser_id: r.browserId, project_id: r.projectId, state: 'recording', started_at_ms: r.startedAtMs, ...this.#heldBy(holder), lease_until: this.#iso(leaseMs) })
      .onConflict('browser_id')
      .ignore()
      .returning('browser_id');
    return rows.length === 1;
  }

  async get(browserId: string): Promise<RecordingRow | undefined> {
    const r = await this.#knex('recordings').where({ browser_id: browserId }).first();
    return r ? recording(r) : undefined;
  }

  /** True while `holder` holds the browser's unfinished recording. */
  async holds(holder: Holder, browserId: string): Promise<boolean> {
    return (await this.#knex('recordings').where({ browser_id: browserId, ...this.#heldBy(holder) }).whereIn('state', UNFINISHED).first('browser_id')) !== undefined;
  }

  /** Which of these browsers have a recording row (in any state). */
  async existing(browserIds: string[]): Promise<Set<string>> {
    if (!browserIds.length) return new Set();
    const rows = await this.#knex('recordings').whereIn('browser_id', browserIds).select('browser_id');
    return new Set(rows.map((r: { browser_id: string }) => r.browser_id));
  }

  /** Unfinished recordings `holder` holds, oldest first. */
  async held(holder: Holder): Promise<RecordingRow[]> {
    return (await this.#knex('recordings').where(this.#heldBy(holder)).whereIn('state', UNFINISHED).orderBy('created_at')).map(recording);
  }

  // ---- leases ----

  /** Extends every lease `holder` holds; returns the browsers it holds. */
  async renewLeases(holder: Holder, leaseMs: number): Promise<Set<string>> {
    const rows = await this.#knex('recordings').where(this.#heldBy(holder)).whereIn('state', UNFINISHED).update({ lease_until: this.#iso(leaseMs) }, ['browser_id']);
    return new Set(rows.map((r: { browser_id: string }) => r.browser_id));
  }

  /** Unfinished recordings whose lease ran out (their holder died or let go), oldest first. */
  async expired(limit: number): Promise<RecordingRow[]> {
    const now = this.#iso();
    return (
      await this.#knex('recordings')
        .whereIn('state', UNFINISHED)
        .andWhere((q) => q.whereNull('lease_until').orWhere('lease_until', '<', now))
        .orderBy('created_at')
        .limit(limit)
    ).map(recording);
  }

  /** Takes over a recording whose lease ran out; undefined when it is held (another taker was first). */
  async takeOver(browserId: string, holder: Holder, leaseMs: number): Promise<RecordingRow | undefined> {
    const now = this.#iso();
    const [r] = await this.#knex('recordings')
      .where({ browser_id: browserId })
      .whereIn('state', UNFINISHED)
      .andWhere((q) => q.whereNull('lease_until').orWhere('lease_until', '<', now))
      .update({ ...this.#heldBy(holder), lease_until: this.#iso(leaseMs), updated_at: now }, ['*']);
    return r ? recording(r) : undefined;
  }

  /** Takes over what earlier processes of this instance id held (they are gone); returns how many. */
  async takeOverPredecessors(holder: Holder, leaseMs: number): Promise<number> {
    const rows = await this.#knex('recordings')
      .where({ instance_id: holder.instanceId })
      .whereNot({ lease_nonce: holder.nonce })
      .whereIn('state', UNFINISHED)
      .update({ lease_nonce: holder.nonce, lease_until: this.#iso(leaseMs), updated_at: this.#iso() }, ['browser_id']);
    return rows.length;
  }

  /** Lets go of every lease `holder` holds, so that another replica takes them over at once. */
  async release(holder: Holder): Promise<number> {
    const rows = await this.#knex('recordings').where(this.#heldBy(holder)).whereIn('state', UNFINISHED).update({ lease_until: this.#iso(-1) }, ['browser_id']);
    return rows.length;
  }

  /**
   * Lets go of one recording whose step failed here: nobody holds it, so the next scan of any
   * replica (this one included) takes it over and tries again, instead of its lease being renewed
   * while nothing records it.
   */
  async letGo(holder: Holder, browserId: string): Promise<boolean> {
    const rows = await this.#knex('recordings')
      .where({ browser_id: browserId, ...this.#heldBy(holder) })
      .whereIn('state', UNFINISHED)
      .update({ lease_nonce: null, lease_until: this.#iso(-1), updated_at: this.#iso() }, ['browser_id']);
    return rows.length > 0;
  }

  // ---- a holder's changes ----

  async setSize(holder: Holder, browserId: string, width: number, height: number): Promise<boolean> {
    const rows = await this.#knex('recordings').where({ browser_id: browserId, ...this.#heldBy(holder) }).update({ width, height, updated_at: this.#iso() }, ['browser_id']);
    return rows.length > 0;
  }

  /** `recording` → `finalizing` with the stop time; false when it was not recording or not held by `holder`. */
  async markStopped(holder: Holder, browserId: string, stoppedAtMs: number): Promise<boolean> {
    const rows = await this.#knex('recordings')
      .where({ browser_id: browserId, state: 'recording', ...this.#heldBy(holder) })
      .update({ state: 'finalizing', stopped_at_ms: stoppedAtMs, updated_at: this.#iso() }, ['browser_id']);
    return rows.length > 0;
  }

  /**
   * `finalizing` → `ready`, and `also` (the webhook event) in the same transaction, so the
   * recording never becomes fetchable without its event, nor the event exist without it; false
   * (and nothing written) when `holder` no longer holds it.
   */
  async markReady(holder: Holder, browserId: string, v: { objectKey: string; sizeBytes: number; durationMs: number }, also?: ReadyWrite): Promise<boolean> {
    return this.#knex.transaction(async (trx) => {
      const rows = await trx('recordings')
        .where({ browser_id: browserId, state: 'finalizing', ...this.#heldBy(holder) })
        .update({ state: 'ready', object_key: v.objectKey, size_bytes: v.sizeBytes, duration_ms: v.durationMs, error: null, lease_until: null, updated_at: this.#iso() }, ['browser_id']);
      if (!rows.length) return false;
      if (also) await also(trx);
      return true;
    });
  }

  async markEnded(holder: Holder, browserId: string, state: 'empty' | 'failed', error: string | null = null): Promise<boolean> {
    const rows = await this.#knex('recordings')
      .where({ browser_id: browserId, ...this.#heldBy(holder) })
      .whereIn('state', UNFINISHED)
      .update({ state, error, lease_until: null, updated_at: this.#iso() }, ['browser_id']);
    return rows.length > 0;
  }

  /** Counts a failed finalisation; returns the number of attempts so far (undefined: not held). */
  async recordAttempt(holder: Holder, browserId: string, error: string): Promise<number | undefined> {
    const [r] = await this.#knex('recordings')
      .where({ browser_id: browserId, ...this.#heldBy(holder) })
      .update({ attempts: this.#knex.raw('attempts + 1'), error: error.slice(0, 2000), updated_at: this.#iso() }, ['attempts']);
    return r ? n(r.attempts) : undefined;
  }

  // ---- parts ----

  /** Records a part its holder begins to encode; false when it no longer holds the recording. */
  async addPart(holder: Holder, p: { browserId: string; seq: number; startMs: number; fps: number; file: string; objectKey: string }): Promise<boolean> {
    const done = await this.#asHolder(holder, p.browserId, async (trx) => {
      await trx('recording_parts').insert({ browser_id: p.browserId, seq: p.seq, start_ms: p.startMs, fps: p.fps, file: p.file, instance_id: holder.instanceId, object_key: p.objectKey });
      return true;
    });
    return done === true;
  }

  /** The part is in object storage, `durationMs` long; false when `holder` no longer holds the recording. */
  async partStored(holder: Holder, browserId: string, seq: number, v: { durationMs: number; sizeBytes: number }): Promise<boolean> {
    const done = await this.#asHolder(holder, browserId, async (trx) => {
      const rows = await trx('recording_parts').where({ browser_id: browserId, seq }).update({ duration_ms: v.durationMs, size_bytes: v.sizeBytes, stored_at: this.#iso() }, ['seq']);
      return rows.length > 0;
    });
    return done === true;
  }

  async parts(browserId: string): Promise<PartRow[]> {
    return (await this.#knex('recording_parts').where({ browser_id: browserId }).orderBy('seq')).map(part);
  }

  /** Forgets parts (empty, or lost with their writer); false when `holder` no longer holds the recording. */
  async dropParts(holder: Holder, browserId: string, seqs: number[]): Promise<boolean> {
    if (!seqs.length) return true;
    const done = await this.#asHolder(holder, browserId, async (trx) => {
      await trx('recording_parts').where({ browser_id: browserId }).whereIn('seq', seqs).delete(['seq']);
      return true;
    });
    return done === true;
  }

  /** Forgets every part of a finished recording. */
  async deleteParts(browserId: string): Promise<void> {
    await this.#knex('recording_parts').where({ browser_id: browserId }).delete(['seq']);
  }

  // ---- instances ----

  async instance(instanceId: string): Promise<InstanceRow | undefined> {
    const r = await this.#knex('instances').where({ instance_id: instanceId }).first();
    return r ? { instanceId: r.instance_id, nonce: r.nonce, heartbeatAtMs: new Date(r.heartbeat_at).getTime(), stopped: r.stopped_at !== null, process: r.process ?? null } : undefined;
  }

  /** Makes `holder` the live process of its instance id (replacing a dead one); `process` names the OS process (processIdentity()). */
  async registerInstance(holder: Holder, process?: string): Promise<void> {
    const now = this.#iso();
    await this.#knex('instances')
      .insert({ instance_id: holder.instanceId, nonce: holder.nonce, started_at: now, heartbeat_at: now, stopped_at: null, process: process ?? null })
      .onConflict('instance_id')
      .merge();
  }

  /** Says `holder` is alive; false when another process took its instance id. */
  async heartbeat(holder: Holder): Promise<boolean> {
    const rows = await this.#knex('instances').where({ instance_id: holder.instanceId, nonce: holder.nonce }).update({ heartbeat_at: this.#iso() }, ['instance_id']);
    return rows.length > 0;
  }

  /** `holder` stopped cleanly. */
  async retireInstance(holder: Holder): Promise<void> {
    await this.#knex('instances').where({ instance_id: holder.instanceId, nonce: holder.nonce }).update({ stopped_at: this.#iso() }, ['instance_id']);
  }

  /** Of these instance ids, the known ones silent for `silentMs` that hold no lease still running. */
  async longGone(instanceIds: string[], silentMs: number): Promise<string[]> {
    if (!instanceIds.length) return [];
    const silent = (await this.#knex('instances').whereIn('instance_id', instanceIds).andWhere('heartbeat_at', '<', this.#iso(-silentMs)).select('instance_id')).map((r: { instance_id: string }) => r.instance_id);
    if (!silent.length) return [];
    const holding = await this.#knex('recordings').whereIn('instance_id', silent).whereIn('state', UNFINISHED).andWhere('lease_until', '>=', this.#iso()).distinct('instance_id');
    const busy = new Set(holding.map((r: { instance_id: string }) => r.instance_id));
    return silent.filter((id) => !busy.has(id));
  }
}
