/**
 * The recordings tables and the only code that knows them. A recording row follows its browser:
 * `recording` while it runs, `finalizing` once it stopped until the MP4 is stored, then `ready`
 * (or `empty` when no frame ever came, `failed` when it could not be stored). Parts are the
 * pieces encoded by one process run each: a crash ends a part, the next process starts another.
 */
import type { Knex, Migration } from '../../common/src/db.js';

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
];

export type RecordingStateName = 'recording' | 'finalizing' | 'ready' | 'empty' | 'failed';

export interface RecordingRow {
  browserId: string;
  projectId: string;
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

export interface PartRow {
  browserId: string;
  seq: number;
  startMs: number;
  fps: number;
  /** Path of the part's file. */
  file: string;
}

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
  return { browserId: r.browser_id, seq: n(r.seq), startMs: n(r.start_ms), fps: n(r.fps), file: r.file };
}

export class RecordingRepository {
  readonly #knex: Knex;
  constructor(knex: Knex) {
    this.#knex = knex;
  }

  /** Inserts a `recording` row unless the browser has one; true when this call created it. */
  async claim(r: { browserId: string; projectId: string; instanceId: string; startedAtMs: number }): Promise<boolean> {
    const rows = await this.#knex('recordings')
      .insert({ browser_id: r.browserId, project_id: r.projectId, instance_id: r.instanceId, state: 'recording', started_at_ms: r.startedAtMs })
      .onConflict('browser_id')
      .ignore()
      .returning('browser_id');
    return rows.length === 1;
  }

  async get(browserId: string): Promise<RecordingRow | undefined> {
    const r = await this.#knex('recordings').where({ browser_id: browserId }).first();
    return r ? recording(r) : undefined;
  }

  /** Which of these browsers have a recording row (in any state). */
  async existing(browserIds: string[]): Promise<Set<string>> {
    if (!browserIds.length) return new Set();
    const rows = await this.#knex('recordings').whereIn('browser_id', browserIds).select('browser_id');
    return new Set(rows.map((r: { browser_id: string }) => r.browser_id));
  }

  /** Rows of this instance in the given states, oldest first. */
  async listByState(instanceId: string, states: RecordingStateName[]): Promise<RecordingRow[]> {
    return (await this.#knex('recordings').where({ instance_id: instanceId }).whereIn('state', states).orderBy('created_at')).map(recording);
  }

  async setSize(browserId: string, width: number, height: number): Promise<void> {
    await this.#knex('recordings').where({ browser_id: browserId }).update({ width, height, updated_at: this.#knex.fn.now() });
  }

  /** `recording` → `finalizing` with the stop time; false when it was not recording. */
  async markStopped(browserId: string, stoppedAtMs: number): Promise<boolean> {
    const n = await this.#knex('recordings').where({ browser_id: browserId, state: 'recording' }).update({ state: 'finalizing', stopped_at_ms: stoppedAtMs, updated_at: this.#knex.fn.now() });
    return n > 0;
  }

  async markReady(browserId: string, v: { objectKey: string; sizeBytes: number; durationMs: number }): Promise<void> {
    await this.#knex('recordings')
      .where({ browser_id: browserId })
      .update({ state: 'ready', object_key: v.objectKey, size_bytes: v.sizeBytes, duration_ms: v.durationMs, error: null, updated_at: this.#knex.fn.now() });
  }

  async markEnded(browserId: string, state: 'empty' | 'failed', error: string | null = null): Promise<void> {
    await this.#knex('recordings').where({ browser_id: browserId }).update({ state, error, updated_at: this.#knex.fn.now() });
  }

  /** Counts a failed finalisation; returns the number of attempts so far. */
  async recordAttempt(browserId: string, error: string): Promise<number> {
    await this.#knex('recordings').where({ browser_id: browserId }).increment('attempts', 1).update({ error: error.slice(0, 2000), updated_at: this.#knex.fn.now() });
    return (await this.get(browserId))?.attempts ?? 0;
  }

  async addPart(p: PartRow): Promise<void> {
    await this.#knex('recording_parts').insert({ browser_id: p.browserId, seq: p.seq, start_ms: p.startMs, fps: p.fps, file: p.file });
  }

  async parts(browserId: string): Promise<PartRow[]> {
    return (await this.#knex('recording_parts').where({ browser_id: browserId }).orderBy('seq')).map(part);
  }

  async deletePart(browserId: string, seq: number): Promise<void> {
    await this.#knex('recording_parts').where({ browser_id: browserId, seq }).delete();
  }

  async deleteParts(browserId: string): Promise<void> {
    await this.#knex('recording_parts').where({ browser_id: browserId }).delete();
  }

  /** Browser ids with parts on disk still to be kept (recording or finalizing). */
  async unfinishedBrowserIds(instanceId: string): Promise<Set<string>> {
    const rows = await this.#knex('recordings').where({ instance_id: instanceId }).whereIn('state', ['recording', 'finalizing']).select('browser_id');
    return new Set(rows.map((r: { browser_id: string }) => r.browser_id));
  }
}
