/** Browser records and their downloads: the only code that knows those tables. */
import type { AgentName } from '../../common/src/agent-name.js';
import type { Knex } from '../../common/src/db.js';
import { keysetPage, newestFirst, type Page } from '../../common/src/keyset.js';

export type BrowserStatus = 'active' | 'stopped';
/** Why a browser stopped; `owner_lost`: the pool instance running it stopped renewing its heartbeat (it died). */
export type StopReason = 'user' | 'run_ended' | 'run_stopped' | 'session_closed' | 'timeout' | 'idle' | 'shutdown' | 'crashed' | 'reclaimed' | 'owner_lost';

/** A browser record. */
export interface BrowserRow {
  id: string;
  projectId: string;
  status: BrowserStatus;
  profileId: string | null;
  sessionId: string | null;
  runId: string | null;
  agent: AgentName | null;
  screenWidth: number;
  screenHeight: number;
  proxyCountryCode: string | null;
  /** Presents a person's browser's fingerprint (false for records made before there was a choice). */
  stealth: boolean;
  /** BCP 47 locale and IANA timezone it presents (null for records made before they existed). */
  locale: string | null;
  timezone: string | null;
  /** Hosts its network may reach (patterns, see egress-proxy.ts); null: any. */
  allowedDomains: string[] | null;
  /** Ads and trackers blocked (adblock.ts). */
  blockAds: boolean;
  liveViewUrl: string | null;
  instanceId: string;
  pid: number | null;
  createdAt: string;
  timeoutAt: string;
  stoppedAt: string | null;
  stopReason: StopReason | null;
}

export type NewBrowser = Omit<BrowserRow, 'status' | 'createdAt' | 'stoppedAt' | 'stopReason'>;

/** A file a browser downloaded, as stored. */
export interface DownloadRow {
  browserId: string;
  name: string;
  sizeBytes: number;
  lastModified: string;
  objectKey: string;
}

const iso = (v: unknown): string => new Date(v as string).toISOString();
const isoOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : iso(v));

/** A browsers row as the domain sees it (for the other repositories of this schema). */
export function browser(r: any): BrowserRow {
  return {
    id: r.id,
    projectId: r.project_id,
    status: r.status,
    profileId: r.profile_id,
    sessionId: r.session_id,
    runId: r.run_id,
    agent: r.agent,
    screenWidth: Number(r.screen_width),
    screenHeight: Number(r.screen_height),
    proxyCountryCode: r.proxy_country_code,
    stealth: !!r.stealth,
    locale: r.locale ?? null,
    timezone: r.timezone ?? null,
    allowedDomains: r.allowed_domains ? (JSON.parse(r.allowed_domains) as string[]) : null,
    blockAds: !!r.block_ads,
    liveViewUrl: r.live_view_url,
    instanceId: r.instance_id,
    pid: r.pid === null ? null : Number(r.pid),
    createdAt: iso(r.created_at),
    timeoutAt: iso(r.timeout_at),
    stoppedAt: isoOrNull(r.stopped_at),
    stopReason: r.stop_reason,
  };
}

function download(r: any): DownloadRow {
  return { browserId: r.browser_id, name: r.name, sizeBytes: Number(r.size_bytes), lastModified: iso(r.last_modified), objectKey: r.object_key };
}

/** Queries of the browsers and browser_downloads tables. */
/**
 * Called inside the transaction that inserts a browser or marks it stopped, with the row as it now
 * is: the webhook outbox records the event there, so the change and its event commit together.
 */
export type BrowserChangeHook = (trx: Knex, b: BrowserRow, change: 'browser.created' | 'browser.stopped') => Promise<void>;

export class BrowserRepository {
  readonly #knex: Knex;
  readonly #lockForCap: boolean;
  readonly #onChange: BrowserChangeHook | undefined;
  /** `driver` 'pg' takes an advisory lock around the cap check (several connections, maybe several replicas). */
  constructor(knex: Knex, driver: 'pg' | 'pglite' = 'pg', onChange?: BrowserChangeHook) {
    this.#knex = knex;
    this.#lockForCap = driver === 'pg';
    this.#onChange = onChange;
  }

  /**
   * Inserts an active browser unless its project already has `cap` active ones, in one statement.
   * On Postgres a per-project advisory lock taken first makes check-and-insert atomic across
   * replicas (each statement then sees the rows committed before it); PGlite runs one statement
   * at a time anyway.
   */
  async insertUnderCap(b: NewBrowser, cap: number, createdAt: Date): Promise<BrowserRow | undefined> {
    const sql = `insert into browsers (id, project_id, status, profile_id, session_id, run_id, agent, screen_width, screen_height,
        proxy_country_code, stealth, locale, timezone, allowed_domains, block_ads, live_view_url, instance_id, pid, created_at, timeout_at)
      select ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
      where (select count(*) from browsers where project_id = ? and status = 'active') < ?
      returning *`;
    const bindings = [
      b.id, b.projectId, b.profileId, b.sessionId, b.runId, b.agent, b.screenWidth, b.screenHeight,
      b.proxyCountryCode, b.stealth, b.locale, b.timezone, b.allowedDomains ? JSON.stringify(b.allowedDomains) : null, b.blockAds, b.liveViewUrl, b.instanceId, b.pid, createdAt, new Date(b.timeoutAt), b.projectId, cap,
    ];
    const insert = async (k: Knex | Knex.Transaction) => {
      const r = await k.raw(sql, bindings);
      const row = r.rows[0] ? browser(r.rows[0]) : undefined;
      if (row && this.#onChange) await this.#onChange(k, row, 'browser.created');
      return row;
    };
    if (!this.#lockForCap && !this.#onChange) return insert(this.#knex);
    return this.#knex.transaction(async (trx) => {
      if (this.#lockForCap) await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`browsers:${b.projectId}`]);
      return insert(trx);
    });
  }

  /** When the soonest active browser of a project times out (for a Retry-After hint). */
  async soonestTimeout(projectId: string): Promise<string | null> {
    const r = await this.#knex('browsers').where({ project_id: projectId, status: 'active' }).min({ soonest: 'timeout_at' }).first();
    return isoOrNull(r?.soonest);
  }

  /** Removes a record that never became usable (its browser failed to start). */
  async delete(id: string): Promise<void> {
    await this.#knex('browsers').where({ id }).delete();
  }

  async byId(id: string): Promise<BrowserRow | undefined> {
    const r = await this.#knex('browsers').where({ id }).first();
    return r ? browser(r) : undefined;
  }

  async get(projectId: string, id: string): Promise<BrowserRow | undefined> {
    const r = await this.#knex('browsers').where({ id, project_id: projectId }).first();
    return r ? browser(r) : undefined;
  }

  /** A page of browsers, newest first (keyset after `cursor`). */
  async list(projectId: string, f: { status?: BrowserStatus; sessionId?: string; limit: number; cursor?: string }): Promise<Page<BrowserRow>> {
    const q = this.#knex('browsers').select('browsers.*').where({ project_id: projectId });
    if (f.status) q.where({ status: f.status });
    if (f.sessionId) q.where({ session_id: f.sessionId });
    return keysetPage(this.#knex, q, { ...newestFirst(), limit: f.limit, cursor: f.cursor, map: browser });
  }

  /** Browsers of every project that are active or stopped at or after `stoppedSince`, by id (keyset after `cursor`). */
  async listRecordable(f: { stoppedSince: Date | undefined; limit: number; cursor?: string }): Promise<Page<BrowserRow>> {
    const q = this.#knex('browsers')
      .select('browsers.*')
      .where((w) => {
        w.where({ status: 'active' });
        if (f.stoppedSince) w.orWhere('stopped_at', '>=', f.stoppedSince);
      });
    return keysetPage(this.#knex, q, { key: [{ column: 'id' }], order: 'asc', limit: f.limit, cursor: f.cursor, map: browser });
  }

  async setPid(id: string, pid: number): Promise<BrowserRow | undefined> {
    const [r] = await this.#knex('browsers').where({ id }).update({ pid }).returning('*');
    return r ? browser(r) : undefined;
  }

  async setLiveViewUrl(id: string, url: string): Promise<void> {
    await this.#knex('browsers').where({ id }).update({ live_view_url: url });
  }

  /** Clears the run id when it is `runId` (the browser is idle from `at`); returns the record either way. */
  async releaseRun(id: string, runId: string, at: Date): Promise<BrowserRow | undefined> {
    if (runId) await this.#knex('browsers').where({ id, run_id: runId }).update({ run_id: null, idle_since: at });
    return this.byId(id);
  }

  /**
   * Gives an active browser to a run: sets its run id when it has none (or already this one);
   * undefined when it is stopped (or reclaimed) or another run holds it. One statement, so it
   * cannot interleave with `reclaimIdle`.
   */
  async claimForRun(id: string, runId: string): Promise<BrowserRow | undefined> {
    const [r] = await this.#knex('browsers')
      .where({ id, status: 'active' })
      .andWhere((q) => q.whereNull('run_id').orWhere('run_id', runId))
      .update({ run_id: runId, idle_since: null })
      .returning('*');
    return r ? browser(r) : undefined;
  }

  /**
   * Marks stopped (reason `reclaimed`) the project's browser idle the longest among those kept only
   * for a session's follow-ups (a browser-agent session's browser with no run), and returns it;
   * undefined when there is none. Standalone browsers and browsers of a run are never taken.
   */
  async reclaimIdle(projectId: string, at: Date): Promise<BrowserRow | undefined> {
    const r = await this.#knex.raw(
      `update browsers set status = 'stopped', stopped_at = ?, stop_reason = 'reclaimed'
        where id = (select id from browsers
                     where project_id = ? and status = 'active' and agent = 'browser-agent' and session_id is not null and run_id is null
                     order by coalesce(idle_since, created_at), id limit 1 for update skip locked)
          and status = 'active' and run_id is null
        returning *`,
      [at, projectId],
    );
    return r.rows[0] ? browser(r.rows[0]) : undefined;
  }

  /** Marks an active browser stopped; undefined when it already was (someone else stopped it). */
  async markStopped(id: string, reason: StopReason, at: Date): Promise<BrowserRow | undefined> {
    return this.#knex.transaction(async (trx) => {
      const [r] = await trx('browsers').where({ id, status: 'active' }).update({ status: 'stopped', stopped_at: at, stop_reason: reason }).returning('*');
      const row = r ? browser(r) : undefined;
      if (row && this.#onChange) await this.#onChange(trx, row, 'browser.stopped');
      return row;
    });
  }

  /** Which of these browsers are recorded stopped (one query for every browser a process runs). */
  async stoppedAmong(ids: string[]): Promise<BrowserRow[]> {
    if (!ids.length) return [];
    return (await this.#knex('browsers').whereIn('id', ids).andWhere({ status: 'stopped' })).map(browser);
  }

  /** Active browsers a pool process (this one, before a restart) was running. */
  async activeOf(instanceId: string): Promise<BrowserRow[]> {
    return (await this.#knex('browsers').where({ instance_id: instanceId, status: 'active' })).map(browser);
  }

  // ---- downloads ----

  async downloads(browserId: string): Promise<DownloadRow[]> {
    return (await this.#knex('browser_downloads').where({ browser_id: browserId }).orderBy([{ column: 'last_modified' }, { column: 'name' }])).map(download);
  }

  async putDownload(d: DownloadRow): Promise<void> {
    await this.#knex('browser_downloads')
      .insert({ browser_id: d.browserId, name: d.name, size_bytes: d.sizeBytes, last_modified: d.lastModified, object_key: d.objectKey })
      .onConflict(['browser_id', 'name'])
      .merge();
  }
}
