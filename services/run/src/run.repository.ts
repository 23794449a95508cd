/**
 * The run service's tables and the only code that knows them: sessions, runs (with their lease),
 * steps and events (a monotonic id per run). The database is the source of truth; NATS only
 * carries notifications.
 */
import type { AgentName } from '../../common/src/agent-name.js';
import type { Knex, Migration } from '../../common/src/db.js';

/**
 * Text as Postgres stores it: a NUL (which a command's output or a page may hold) cannot be in a
 * text column, so it is kept as the visible ␀ (U+2400) rather than failing the run.
 */
export function storable<T extends string | null>(s: T): T {
  return (s === null || !s.includes('\u0000') ? s : s.replace(/\u0000/g, '\u2400')) as T;
}
import { toCount } from '../../common/src/db.js';
import { keysetPage, newestFirst } from '../../common/src/keyset.js';
import { outboxMigration } from '../../common/src/outbox.js';

export const migrations: Migration[] = [
  {
    name: '20261122020000_sessions_runs_steps_events',
    async up(knex) {
      await knex.schema.createTable('sessions', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('agent').notNullable();
        t.string('status', 8).notNullable();
        t.string('disk_id');
        t.string('browser_id');
        t.string('workspace_id');
        t.string('latest_run_id');
        t.string('closed_reason');
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(['project_id', 'agent', 'created_at']);
        t.index(['browser_id']);
      });
      await knex.schema.createTable('runs', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('agent').notNullable();
        t.string('session_id').notNullable();
        t.string('status', 12).notNullable();
        t.text('task').notNullable();
        t.string('model').notNullable();
        t.text('browser_options').notNullable();
        t.text('missing_file_ids').notNullable();
        t.string('workspace_id');
        t.string('disk_id');
        t.string('browser_id');
        t.text('result');
        t.text('error');
        t.decimal('total_cost_usd', 18, 8).notNullable().defaultTo(0);
        t.integer('total_input_tokens').notNullable().defaultTo(0);
        t.integer('total_output_tokens').notNullable().defaultTo(0);
        t.string('lease_owner');
        t.timestamp('lease_expires_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('started_at', { useTz: true });
        t.timestamp('finished_at', { useTz: true });
        t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(['status', 'created_at']);
        t.index(['project_id', 'agent', 'created_at']);
        t.index(['session_id']);
      });
      await knex.schema.createTable('steps', (t) => {
        t.string('run_id').notNullable();
        t.integer('number').notNullable();
        t.text('url');
        t.text('action').notNullable();
        t.text('thought');
        t.string('screenshot_key');
        t.timestamp('ts', { useTz: true }).notNullable();
        t.integer('duration_ms').notNullable();
        t.primary(['run_id', 'number']);
      });
      await knex.schema.createTable('events', (t) => {
        t.string('run_id').notNullable();
        t.integer('id').notNullable();
        t.timestamp('ts', { useTz: true }).notNullable();
        t.string('type').notNullable();
        t.text('data').notNullable();
        t.primary(['run_id', 'id']);
      });
    },
  },
  {
    // A run waiting queued for a browser slot is not claimed again before this (a wake-up clears it).
    name: '20261125010000_runs_not_before',
    async up(knex) {
      await knex.schema.alterTable('runs', (t) => {
        t.timestamp('not_before', { useTz: true });
      });
    },
  },
  {
    // The id of the request that created the run: its worker logs under it, so one grep finds the run's whole story.
    name: '20261126000000_runs_request_id',
    async up(knex) {
      await knex.schema.alterTable('runs', (t) => {
        t.string('request_id', 100);
      });
    },
  },
  // Webhook events, written in the transaction of the run's status change (see RunChangeHook).
  outboxMigration('20261202000000_webhook_outbox'),
  {
    // A run whose worker died is taken over by another (takeovers counts them, up to a bound), which
    // rebuilds the agent loop from its checkpoints: one per action the model took (see Checkpoint).
    name: '20261203000000_run_takeovers_checkpoints',
    async up(knex) {
      await knex.schema.alterTable('runs', (t) => {
        t.integer('takeovers').notNullable().defaultTo(0);
      });
      await knex.schema.createTable('run_checkpoints', (t) => {
        t.string('run_id').notNullable();
        t.integer('seq').notNullable();
        t.text('data').notNullable();
        t.primary(['run_id', 'seq']);
      });
    },
  },
  {
    // A worker shutting down (a restart, a rolling update) hands its runs over at once: their lease
    // is let go early and marked, so the worker taking one over says why (see handOver).
    name: '20261204000000_run_handed_over',
    async up(knex) {
      await knex.schema.alterTable('runs', (t) => {
        t.boolean('handed_over').notNullable().defaultTo(false);
      });
    },
  },
  {
    // Which OS process holds the lease (processIdentity()): a worker on the same host sees at once that it is gone.
    name: '20261216000000_run_lease_process',
    async up(knex) {
      await knex.schema.alterTable('runs', (t) => {
        t.string('lease_process', 200);
      });
    },
  },
];

/**
 * What the agent loop needs to go on after an action: the action as the model remembers it
 * (`memory`, a StepMemory) and the loop's counters after it. `seq` is its place in the history (1-based).
 */
export interface Checkpoint {
  seq: number;
  memory: unknown;
  state: { steps: number; browserSteps: number; model?: unknown };
}

/** The run events a webhook endpoint can receive. */
export type RunChange = 'run.queued' | 'run.started' | 'run.completed' | 'run.failed' | 'run.stopped';

/**
 * Called inside the transaction that changes a run's status, with the run as it is now: the
 * webhook outbox records the event there, so the change and its event commit together or not at all.
 */
export type RunChangeHook = (trx: Knex, run: RunRow, change: RunChange) => Promise<void>;

export type RunStatus = 'queued' | 'running' | 'completed' | 'stopped' | 'failed';
export const TERMINAL: readonly RunStatus[] = ['completed', 'stopped', 'failed'];
/** The event types that end a run's event list: nothing is appended after one. */
export const TERMINAL_EVENT_TYPES: readonly string[] = ['run.completed', 'run.failed', 'run.stopped'];

export interface BrowserOptions {
  proxyCountryCode?: string | undefined;
  screenWidth?: number | undefined;
  screenHeight?: number | undefined;
  profileId?: string | undefined;
  /** What the browser presents to pages (browser-pool's identity.ts); unset: the pool's defaults. */
  stealth?: boolean | undefined;
  locale?: string | undefined;
  timezone?: string | undefined;
  allowedDomains?: string[] | undefined;
  /** Unset: true (a run's browser blocks ads and trackers). */
  blockAds?: boolean | undefined;
}

export interface RunRow {
  id: string;
  projectId: string;
  agent: AgentName;
  sessionId: string;
  status: RunStatus;
  task: string;
  model: string;
  browser: BrowserOptions;
  missingFileIds: string[];
  workspaceId: string | null;
  diskId: string | null;
  browserId: string | null;
  result: string | null;
  error: string | null;
  totalCostUsd: string;
  totalInputTokens: number;
  totalOutputTokens: number;
  leaseOwner: string | null;
  /** How often another worker took the run over after its worker died. */
  takeovers: number;
  /** The request that created the run; null for runs created before it was kept, or outside a request. */
  requestId: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
}

export interface SessionRow {
  id: string;
  projectId: string;
  agent: AgentName;
  status: 'open' | 'closed';
  diskId: string | null;
  browserId: string | null;
  workspaceId: string | null;
  latestRunId: string | null;
  closedReason: string | null;
  busy: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface StepRow {
  runId: string;
  number: number;
  url: string | null;
  action: string;
  thought: string | null;
  screenshotKey: string | null;
  ts: string;
  durationMs: number;
}

export interface EventRow {
  runId: string;
  id: number;
  ts: string;
  type: string;
  data: Record<string, unknown>;
}

const iso = (v: unknown): string | null => (v == null ? null : new Date(v as string).toISOString());

function decimal(v: unknown): string {
  const s = String(v ?? '0');
  return s.includes('.') ? s.replace(/\.?0+$/, '') || '0' : s;
}

function run(r: any): RunRow {
  return {
    id: r.id,
    projectId: r.project_id,
    agent: r.agent,
    sessionId: r.session_id,
    status: r.status,
    task: r.task,
    model: r.model,
    browser: JSON.parse(r.browser_options),
    missingFileIds: JSON.parse(r.missing_file_ids),
    workspaceId: r.workspace_id,
    diskId: r.disk_id,
    browserId: r.browser_id,
    result: r.result,
    error: r.error,
    totalCostUsd: decimal(r.total_cost_usd),
    totalInputTokens: Number(r.total_input_tokens),
    totalOutputTokens: Number(r.total_output_tokens),
    leaseOwner: r.lease_owner,
    takeovers: Number(r.takeovers ?? 0),
    requestId: r.request_id ?? null,
    createdAt: iso(r.created_at)!,
    startedAt: iso(r.started_at),
    finishedAt: iso(r.finished_at),
    updatedAt: iso(r.updated_at)!,
  };
}

function session(r: any): SessionRow {
  return {
    id: r.id,
    projectId: r.project_id,
    agent: r.agent,
    status: r.status,
    diskId: r.disk_id,
    browserId: r.browser_id,
    workspaceId: r.workspace_id,
    latestRunId: r.latest_run_id,
    closedReason: r.status === 'closed' ? (r.closed_reason ?? null) : null,
    busy: Boolean(r.busy),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  };
}

/** A session row with `busy` = it has a queued or running run. */
const SESSION_COLUMNS = (knex: Knex) => [
  's.*',
  knex.raw(`exists (select 1 from runs r where r.session_id = s.id and r.status in ('queued', 'running')) as busy`),
];

export class RunRepository {
  readonly knex: Knex;
  /** The time leases, waits and timestamps are reckoned by; tests move it instead of sleeping. */
  readonly #now: () => Date;
  readonly #onChange: RunChangeHook | undefined;
  constructor(knex: Knex, options: { now?: () => Date; onChange?: RunChangeHook } = {}) {
    this.knex = knex;
    this.#now = options.now ?? (() => new Date());
    this.#onChange = options.onChange;
  }

  async #changed(trx: Knex, id: string, change: RunChange): Promise<void> {
    if (this.#onChange) await this.#onChange(trx, (await this.run(id, trx))!, change);
  }

  #iso(offsetMs = 0): string {
    return new Date(this.#now().getTime() + offsetMs).toISOString();
  }

  // ---- sessions ----

  async insertSession(s: { id: string; projectId: string; agent: AgentName; diskId: string | null; workspaceId: string | null }, trx: Knex = this.knex): Promise<void> {
    await trx('sessions').insert({ id: s.id, project_id: s.projectId, agent: s.agent, status: 'open', disk_id: s.diskId, workspace_id: s.workspaceId });
  }

  async session(projectId: string, agent: AgentName | null, id: string, trx: Knex = this.knex): Promise<SessionRow | undefined> {
    const q = trx('sessions as s').select(SESSION_COLUMNS(trx)).where({ 's.id': id, 's.project_id': projectId });
    if (agent) q.where('s.agent', agent);
    const r = await q.first();
    return r ? session(r) : undefined;
  }

  async sessions(projectId: string, agent: AgentName, status: 'open' | 'closed' | null, limit: number, cursor: string | undefined) {
    const q = this.knex('sessions as s').select(SESSION_COLUMNS(this.knex)).where({ 's.project_id': projectId, 's.agent': agent });
    if (status) q.where('s.status', status);
    return keysetPage(this.knex, q, { ...newestFirst('s'), limit, cursor, map: session });
  }

  /** The session's newest run is `runId` (in the transaction that inserts the run). */
  async setLatestRun(sessionId: string, runId: string, trx: Knex = this.knex): Promise<void> {
    await trx('sessions').where({ id: sessionId }).update({ latest_run_id: runId, updated_at: this.#iso() });
  }

  /** The session keeps `browserId` for its follow-up runs. */
  async attachBrowser(sessionId: string, browserId: string): Promise<void> {
    await this.knex('sessions').where({ id: sessionId }).update({ browser_id: browserId, updated_at: this.#iso() });
  }

  /** Closes a session that is still open (a closed one keeps the reason it closed for). */
  async closeSession(id: string, reason: string): Promise<void> {
    await this.knex('sessions').where({ id, status: 'open' }).update({ status: 'closed', closed_reason: reason, updated_at: this.#iso() });
  }

  /** Closes the open sessions whose browser is `browserId`; returns their ids. */
  async closeSessionsOfBrowser(browserId: string, reason: string): Promise<string[]> {
    const rows = await this.knex('sessions').where({ browser_id: browserId, status: 'open', agent: 'browser-agent' }).update({ status: 'closed', closed_reason: reason, updated_at: this.#iso() }, ['id']);
    return rows.map((r: { id: string }) => r.id);
  }

  // ---- runs ----

  async insertRun(r: { id: string; projectId: string; agent: AgentName; sessionId: string; task: string; model: string; browser: BrowserOptions; missingFileIds: string[]; workspaceId: string | null; diskId: string | null; requestId?: string | null }, trx: Knex = this.knex): Promise<void> {
    await trx('runs').insert({
      id: r.id,
      project_id: r.projectId,
      agent: r.agent,
      session_id: r.sessionId,
      status: 'queued',
      task: r.task,
      model: r.model,
      browser_options: JSON.stringify(r.browser),
      missing_file_ids: JSON.stringify(r.missingFileIds),
      workspace_id: r.workspaceId,
      disk_id: r.diskId,
      request_id: r.requestId ?? null,
    });
    await this.#changed(trx, r.id, 'run.queued');
  }

  async run(id: string, trx: Knex = this.knex): Promise<RunRow | undefined> {
    const r = await trx('runs').where({ id }).first();
    return r ? run(r) : undefined;
  }

  async runs(projectId: string, agent: AgentName, filter: { sessionId?: string; status?: RunStatus }, limit: number, cursor: string | undefined) {
    const q = this.knex('runs as r').select('r.*').where({ 'r.project_id': projectId, 'r.agent': agent });
    if (filter.sessionId) q.where('r.session_id', filter.sessionId);
    if (filter.status) q.where('r.status', filter.status);
    return keysetPage(this.knex, q, { ...newestFirst('r'), limit, cursor, map: run });
  }

  /** Earlier finished turns of a session, oldest first (what the agent sees of the conversation). */
  async turns(sessionId: string, beforeRunId: string): Promise<{ task: string; result: string | null; status: RunStatus }[]> {
    const before = await this.knex('runs').where({ id: beforeRunId }).first('created_at');
    const rows = await this.knex('runs').where({ session_id: sessionId }).whereIn('status', TERMINAL).andWhere('created_at', '<', before.created_at).orderBy('created_at');
    return rows.map((r) => ({ task: r.task, result: r.result, status: r.status }));
  }

  /**
   * Claims the oldest queued run that may start: its project is under `limit` running runs and
   * its session has no running run. A global advisory lock serialises claimers across replicas
   * (claims are short), and SKIP LOCKED keeps them off rows another transaction holds.
   */
  async claim(owner: string, leaseMs: number, limit: number, process?: string): Promise<RunRow | undefined> {
    return this.knex.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(727201)');
      const row = await trx('runs as r')
        .where('r.status', 'queued')
        .whereRaw(`(select count(*) from runs x where x.project_id = r.project_id and x.status = 'running') < ?`, [limit])
        // Nothing else of the session runs, or is still winding down after a stop (bounded by its lease).
        .whereNotExists(
          trx('runs as y')
            .where('y.session_id', trx.ref('r.session_id'))
            .andWhere((q) => q.where('y.status', 'running').orWhere((w) => w.whereNotNull('y.lease_owner').andWhere('y.lease_expires_at', '>', this.#iso()))),
        )
        // Not one waiting for a browser slot, until its wait is over or it is woken.
        .andWhere((q) => q.whereNull('r.not_before').orWhere('r.not_before', '<=', this.#iso()))
        .orderBy([{ column: 'r.created_at' }, { column: 'r.id' }])
        .forUpdate()
        .skipLocked()
        .first('r.id');
      if (!row) return undefined;
      const now = this.#now();
      await trx('runs').where({ id: row.id }).update({
        status: 'running',
        lease_owner: owner,
        lease_process: process ?? null,
        lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
        started_at: now.toISOString(),
        updated_at: now.toISOString(),
        not_before: null,
      });
      return this.run(row.id, trx);
    });
  }

  /**
   * Puts a claimed run back in the queue, not to be claimed before `notBefore` (it waits for a
   * browser slot); false when this owner no longer holds it running (it was stopped meanwhile).
   */
  async requeue(id: string, owner: string, notBefore: Date): Promise<boolean> {
    const n = await this.knex('runs')
      .where({ id, lease_owner: owner, status: 'running' })
      .update({ status: 'queued', lease_owner: null, lease_expires_at: null, started_at: null, not_before: notBefore.toISOString(), updated_at: this.#iso() });
    return n > 0;
  }

  /** Queued runs of the project waiting for a browser slot may be claimed at once (a slot may be free). */
  async wakeWaiting(projectId: string): Promise<number> {
    return this.knex('runs').where({ project_id: projectId, status: 'queued' }).whereNotNull('not_before').update({ not_before: null });
  }

  /** Extends the lease of runs this owner still holds; returns the ids it no longer holds running. */
  async renewLeases(owner: string, ids: string[], leaseMs: number): Promise<string[]> {
    if (!ids.length) return [];
    const until = this.#iso(leaseMs);
    const renewed = await this.knex('runs').whereIn('id', ids).andWhere({ lease_owner: owner, status: 'running' }).update({ lease_expires_at: until }, ['id']);
    const held = new Set(renewed.map((r: { id: string }) => r.id));
    return ids.filter((id) => !held.has(id));
  }

  /**
   * Takes over running runs whose lease ran out (their worker died): each gets `owner` and a new
   * lease, its takeover count one up, in one statement, so of replicas racing one takes it. Only
   * `running` rows: a run stopped meanwhile stays stopped. A run taken over `maxTakeovers` times
   * already fails with `overError` instead. Returns both.
   */
  async takeOverExpired(owner: string, leaseMs: number, maxTakeovers: number, overError: string, process?: string): Promise<{ taken: (RunRow & { handedOver: boolean })[]; failed: RunRow[] }> {
    const now = this.#iso();
    return this.knex.transaction(async (trx) => {
      // Locked first (a second replica waits, then finds their leases renewed): whether each was handed over is read before it is reset.
      const due = await trx('runs').where('status', 'running').andWhere('lease_expires_at', '<', now).andWhere('takeovers', '<', maxTakeovers).forUpdate().select('id', 'handed_over');
      const handedOver = new Set(due.filter((r) => r.handed_over).map((r) => r.id as string));
      const taken = due.length
        ? await trx('runs')
            .whereIn(
              'id',
              due.map((r) => r.id),
            )
            .update({ lease_owner: owner, lease_process: process ?? null, lease_expires_at: this.#iso(leaseMs), takeovers: trx.raw('takeovers + 1'), handed_over: false, updated_at: now }, ['*'])
        : [];
      const failed = await trx('runs')
        .where('status', 'running')
        .andWhere('lease_expires_at', '<', now)
        .andWhere('takeovers', '>=', maxTakeovers)
        .update({ status: 'failed', error: overError, finished_at: now, updated_at: now, lease_owner: null }, ['*']);
      for (const r of failed) await this.#changed(trx, r.id, 'run.failed');
      return { taken: taken.map((r) => ({ ...run(r), handedOver: handedOver.has(r.id) })), failed: failed.map(run) };
    });
  }

  /** The other owners of leases on running runs that have not run out, each with the process it said it is (claim's `process`). */
  async otherLeaseOwners(owner: string): Promise<{ owner: string; process: string | null }[]> {
    const rows = await this.knex('runs').where('status', 'running').andWhere('lease_expires_at', '>=', this.#iso()).andWhereNot('lease_owner', owner).distinct('lease_owner', 'lease_process');
    return rows.map((r: { lease_owner: string; lease_process: string | null }) => ({ owner: r.lease_owner, process: r.lease_process }));
  }

  /** `owner` is gone (its process ended): the leases of its running runs end now, for takeOverExpired. Returns how many. */
  async expireLeasesOf(owner: string): Promise<number> {
    return this.knex('runs').where({ lease_owner: owner, status: 'running' }).update({ lease_expires_at: new Date(0).toISOString(), updated_at: this.#iso() });
  }

  /**
   * This worker is shutting down and lets go of a run it holds (still running): its lease ends now
   * and is marked handed over, so the next replica's reaper takes it over at once and says why.
   */
  async handOver(id: string, owner: string): Promise<boolean> {
    const n = await this.knex('runs').where({ id, lease_owner: owner, status: 'running' }).update({ lease_expires_at: new Date(0).toISOString(), handed_over: true, updated_at: this.#iso() });
    return n > 0;
  }

  /**
   * Moves a run to a terminal status if it is still in one of `from`; false when it was not.
   * `keepLease` (a stop from outside): the worker still holds the run until it has wound down
   * (stored its files), and the session's next run waits for that (see claim, releaseLease).
   */
  async finish(id: string, from: RunStatus[], to: RunStatus, fields: { result?: string | null; error?: string | null } = {}, opts: { keepLease?: boolean } = {}): Promise<boolean> {
    const now = this.#iso();
    const text = { ...(fields.result !== undefined ? { result: storable(fields.result) } : {}), ...(fields.error !== undefined ? { error: storable(fields.error) } : {}) };
    return this.knex.transaction(async (trx) => {
      const n = await trx('runs')
        .where({ id })
        .whereIn('status', from)
        .update({ status: to, ...text, finished_at: now, updated_at: now, ...(opts.keepLease ? {} : { lease_owner: null }) });
      if (n > 0 && to !== 'queued' && to !== 'running') await this.#changed(trx, id, `run.${to}`);
      return n > 0;
    });
  }

  /**
   * The worker is done with a run that ended: the session's next run may start. A run put back in
   * the queue let go of its lease already, and may hold a new one of the same owner by now.
   */
  async releaseLease(id: string, owner: string): Promise<void> {
    await this.knex('runs').where({ id, lease_owner: owner }).whereIn('status', TERMINAL).update({ lease_owner: null });
  }

  async setRunBrowser(id: string, browserId: string): Promise<void> {
    await this.knex('runs').where({ id }).update({ browser_id: browserId, updated_at: this.#iso() });
  }

  async addUsage(id: string, usage: { inputTokens: number; outputTokens: number; costUsd: number }): Promise<void> {
    await this.knex('runs')
      .where({ id })
      .update({
        total_input_tokens: this.knex.raw('total_input_tokens + ?', [usage.inputTokens]),
        total_output_tokens: this.knex.raw('total_output_tokens + ?', [usage.outputTokens]),
        total_cost_usd: this.knex.raw('total_cost_usd + ?', [usage.costUsd.toFixed(8)]),
        updated_at: this.#iso(),
      });
  }

  async runningCount(projectId: string): Promise<number> {
    const [{ c }] = await this.knex('runs').where({ project_id: projectId, status: 'running' }).count({ c: '*' });
    return toCount(c);
  }

  // ---- steps ----

  /**
   * Records a step of a running run, and with it (same transaction) the loop's checkpoint after
   * it, so a run taken over never repeats a recorded step; false (nothing stored) once the run has ended.
   */
  async insertStep(s: StepRow, checkpoint?: Checkpoint): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const r = await trx.raw(
        `insert into steps (run_id, number, url, action, thought, screenshot_key, ts, duration_ms)
         select ?, ?, ?, ?, ?, ?, ?, ? where exists (select 1 from runs where id = ? and status in ('queued', 'running'))
         returning number`,
        [s.runId, s.number, storable(s.url), storable(s.action), storable(s.thought), s.screenshotKey, s.ts, s.durationMs, s.runId],
      );
      if (!r.rows.length) return false;
      if (checkpoint) await this.saveCheckpoint(s.runId, checkpoint, trx);
      return true;
    });
  }

  /** Stores (or replaces) a checkpoint of a running run; false (nothing stored) once the run has ended. */
  async saveCheckpoint(runId: string, c: Checkpoint, trx: Knex = this.knex): Promise<boolean> {
    const data = storable(JSON.stringify({ memory: c.memory, state: c.state }));
    const r = await trx.raw(
      `insert into run_checkpoints (run_id, seq, data)
       select ?, ?, ? where exists (select 1 from runs where id = ? and status in ('queued', 'running'))
       on conflict (run_id, seq) do update set data = excluded.data
       returning seq`,
      [runId, c.seq, data, runId],
    );
    return r.rows.length > 0;
  }

  /** A run's checkpoints, in order. */
  async checkpoints(runId: string): Promise<Checkpoint[]> {
    const rows = await this.knex('run_checkpoints').where('run_id', runId).orderBy('seq');
    return rows.map((r) => ({ seq: r.seq, ...JSON.parse(r.data) }));
  }

  /** The number of a run's last recorded step (0 when none). */
  async lastStepNumber(runId: string): Promise<number> {
    const r = await this.knex('steps').where('run_id', runId).max({ n: 'number' }).first();
    return Number(r?.n ?? 0);
  }

  /** The run's last `tool.call` event when no `tool.result` followed it (its command was cut short). */
  async unansweredToolCall(runId: string): Promise<Record<string, unknown> | undefined> {
    const last = await this.knex('events').where('run_id', runId).whereIn('type', ['tool.call', 'tool.result']).orderBy('id', 'desc').first('type', 'data');
    return last?.type === 'tool.call' ? JSON.parse(last.data) : undefined;
  }

  async steps(runId: string, after: number, limit: number): Promise<{ steps: StepRow[]; hasMore: boolean }> {
    const rows = await this.knex('steps').where('run_id', runId).andWhere('number', '>', after).orderBy('number').limit(limit + 1);
    return {
      steps: rows.slice(0, limit).map((r) => ({ runId: r.run_id, number: r.number, url: r.url, action: r.action, thought: r.thought, screenshotKey: r.screenshot_key, ts: iso(r.ts)!, durationMs: r.duration_ms })),
      hasMore: rows.length > limit,
    };
  }

  // ---- events ----

  /**
   * Appends an event with the next id of its run; a per-run advisory lock makes ids strictly serial.
   * A run's list ends at its terminal event: undefined (nothing stored) when the run already has
   * one, or, for any other event, when the run has already ended (its terminal event follows).
   */
  async appendEvent(runId: string, type: string, data: Record<string, unknown>): Promise<EventRow | undefined> {
    const ts = this.#iso();
    const terminal = TERMINAL_EVENT_TYPES.includes(type);
    return this.knex.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [runId]);
      const r = await trx.raw(
        // Nothing follows a terminal event, so only the newest event (found by the key) can be one.
        `with newest as (select id, type from events where run_id = ? order by id desc limit 1)
         insert into events (run_id, id, ts, type, data)
         select ?, coalesce((select id from newest), 0) + 1, ?, ?, ?
          where coalesce((select type from newest), '') not in (${TERMINAL_EVENT_TYPES.map(() => '?').join(', ')})
            and (? or exists (select 1 from runs where id = ? and status in ('queued', 'running')))
         returning id`,
        [runId, runId, ts, type, JSON.stringify(data), ...TERMINAL_EVENT_TYPES, terminal, runId],
      );
      const row = r.rows[0];
      // A run starts (for webhooks) when its worker records so, not at a claim it may hand back.
      if (row && type === 'run.started') await this.#changed(trx, runId, 'run.started');
      return row ? { runId, id: Number(row.id), ts, type, data } : undefined;
    });
  }

  /** Whether the run has an event of this type. */
  async hasEvent(runId: string, type: string): Promise<boolean> {
    return Boolean(await this.knex('events').where({ run_id: runId, type }).first('id'));
  }

  /** The type and id of a run's newest event, if any. */
  async lastEvent(runId: string): Promise<{ id: number; type: string } | undefined> {
    const r = await this.knex('events').where('run_id', runId).orderBy('id', 'desc').first('id', 'type');
    return r ? { id: Number(r.id), type: r.type } : undefined;
  }

  async events(runId: string, after: number, limit: number): Promise<{ events: EventRow[]; hasMore: boolean }> {
    const rows = await this.knex('events').where('run_id', runId).andWhere('id', '>', after).orderBy('id').limit(limit + 1);
    return { events: rows.slice(0, limit).map((r) => ({ runId: r.run_id, id: Number(r.id), ts: iso(r.ts)!, type: r.type, data: JSON.parse(r.data) })), hasMore: rows.length > limit };
  }
}
