/**
 * Records every browser of the pool from its creation to its stop. The pool is the source of
 * truth: on start and every `reconcileMs` the recorder lists the browsers that are active or
 * stopped since it last looked, and takes on each it has no recording of; the
 * `ats.browser.<id>.{started,stopped}` events only make it quicker. A browser is claimed in the
 * database with a lease (so one replica records it); its video begins at the browser's creation
 * as the pool recorded it, so a recorder that learns of a browser late still makes a video as long
 * as the browser lived (the first picture stands for the time before), and a browser that stopped
 * before anyone recorded it gets a still picture for its whole life. Its end comes from the
 * `stopped` event or, if that is lost, from its frame stream ending with the pool saying it
 * stopped.
 *
 * Any replica resumes a recording whose holder died (its lease ran out) or an earlier process of
 * this instance left: from where its stored parts end, the gap while nobody recorded showing the
 * last picture, so the video still lasts wall time; when the browser stopped meanwhile, the
 * recording is closed there and finalised. A `finalizing` one is finalised.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { NatsConnection } from '../../common/src/bus.js';
import { RemoteError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { browserLifecycle, subscribe, type Delivery } from '../../common/src/subjects.js';
import type { BrowserLifecycleEvent } from '../../../gen/ats/common/v1/common.js';
import type { Browser } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { BrowserRecording, type RecordingSettings } from './browser-recording.js';
import type { Ffmpeg } from './ffmpeg.js';
import type { FeedEnd } from './frame-feed.js';
import { fitEven } from './jpeg-size.js';
import { reapOrphanEncoders } from './part-encoder.js';
import type { PartStore } from './part-store.js';
import { isActive, type FrameSource } from './pool-client.js';
import type { RecordingRepository, RecordingRow, RecordingStatus } from './recording.repository.js';
import type { Finalizer } from './recording-finalizer.js';
import type { RecordingLeases } from './recording-leases.js';

/** Scratch of an instance silent this long, holding no lease, is removed by whoever starts next to it. */
const SCRATCH_KEPT_MS = 3600_000;

export interface RecorderOptions {
  repo: RecordingRepository;
  source: FrameSource;
  finalizer: Finalizer;
  ffmpeg: Ffmpeg;
  /** `dir` is the root of every instance's scratch. */
  settings: RecordingSettings;
  /** This instance's scratch and the parts in object storage. */
  parts: PartStore;
  leases: RecordingLeases;
  logger: Logger;
  now?: () => number;
  /** Longest gap filled with the last frame when a recording resumes (longer ones are cut). */
  maxGapMs?: number;
  /** How often the pool is asked for browsers the events did not tell of; 0: only at start. */
  reconcileMs?: number;
  /** How far back the first look at the pool takes on stopped browsers nobody recorded. */
  lookbackMs?: number;
  /** Recordings started at once (default 4); more wait their turn. */
  startConcurrency?: number;
}

/** At most `limit` tasks at once; the others wait in order. */
export class Gate {
  #running = 0;
  readonly #waiting: (() => void)[] = [];
  constructor(readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.limit) await new Promise<void>((r) => this.#waiting.push(r));
    else this.#running++;
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

interface BrowserEvent {
  browserId: string;
  projectId: string;
  tsMs: number;
}

/** The browser event of a lifecycle message; undefined when it names no project or another browser than its subject. */
export function browserEventOf({ key, payload }: Delivery<{ browserId: string }, BrowserLifecycleEvent>, now: number): BrowserEvent | undefined {
  if (!payload.projectId || (payload.browserId && payload.browserId !== key.browserId)) return undefined;
  const ts = Date.parse(payload.ts);
  return { browserId: key.browserId, projectId: payload.projectId, tsMs: Number.isFinite(ts) ? ts : now };
}

export class Recorder {
  readonly #o: RecorderOptions;
  readonly #now: () => number;
  readonly #active = new Map<string, BrowserRecording>();
  readonly #lanes = new Map<string, Promise<void>>();
  readonly #resumeTimers = new Set<NodeJS.Timeout>();
  /** Recordings being started at once: a burst of browsers queues here instead of crowding the database and the pool together. */
  readonly #starts: Gate;
  #reconcileTimer: NodeJS.Timeout | undefined;
  /** Our clock when the last complete look at the pool began. */
  #reconciledAt: number | undefined;
  #unsubscribe: (() => void) | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: RecorderOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#starts = new Gate(options.startConcurrency ?? 4);
  }

  /** Browsers being recorded by this process. */
  get activeCount(): number {
    return this.#active.size;
  }

  /**
   * Takes over from an earlier process of this instance (refusing to start beside a live one of
   * the same id), cleans up its scratch and resumes its recordings; then follows the leases (taking
   * over what dead replicas held); with `record`, takes on every browser of the pool and follows
   * lifecycle events (from `nc`, when there is a bus).
   */
  async start(nc: NatsConnection | undefined, record = true): Promise<void> {
    await this.#o.leases.start();
    fs.mkdirSync(this.#o.parts.dir, { recursive: true });
    reapOrphanEncoders(this.#o.parts.dir, this.#o.logger);
    await this.#removeStrays();
    await this.#removeLongGone();
    if (nc && record) {
      const sub = subscribe(
        nc,
        browserLifecycle,
        (d) => {
          const event = browserEventOf(d, this.#now());
          if (event && d.key.kind === 'started') this.onStarted(event);
          else if (event) this.onStopped(event);
        },
        { logger: this.#o.logger },
      );
      this.#unsubscribe = () => sub.unsubscribe();
    }
    for (const row of await this.#o.repo.held(this.#o.parts.holder)) void this.#lane(row.browserId, () => this.#resume(row));
    this.#o.leases.listen({
      writing: () => [...this.#active.keys()],
      lost: (ids) => ids.forEach((id) => this.#lost(id)),
      taken: (row) => void this.#lane(row.browserId, () => this.#resume(row)),
    });
    // In the background: a pool that is down must not hold up the start.
    if (record) void this.#reconcileLoop();
  }

  async #reconcileLoop(): Promise<void> {
    try {
      await this.#reconcile();
    } catch (err) {
      this.#o.logger.warn({ code: err instanceof RemoteError ? err.code : undefined, err: err instanceof RemoteError ? err.message : err }, 'browser pool not listed; trying again later');
    }
    const every = this.#o.reconcileMs ?? 5000;
    if (every > 0 && !this.#stopping) {
      this.#reconcileTimer = setTimeout(() => void this.#reconcileLoop(), every);
      this.#reconcileTimer.unref();
    }
  }

  /** Takes on every browser the pool has active, or stopped since the last look, that has no recording yet. */
  async #reconcile(): Promise<void> {
    const began = this.#now();
    // A margin for the two clocks and for browsers stopping while the last look ran.
    const since = this.#reconciledAt === undefined ? began - (this.#o.lookbackMs ?? 24 * 3600_000) : this.#reconciledAt - 60_000;
    let cursor = '';
    do {
      const page = await this.#o.source.listRecordable(new Date(since).toISOString(), cursor);
      const unseen = page.items.filter((b) => !this.#active.has(b.id));
      const known = unseen.length ? await this.#o.repo.existing(unseen.map((b) => b.id)) : new Set<string>();
      for (const b of unseen) {
        if (!known.has(b.id)) void this.#lane(b.id, () => this.#starts.run(() => this.#adopt(b)));
      }
      cursor = page.nextCursor;
    } while (cursor && !this.#stopping);
    this.#reconciledAt = began;
  }

  /** Deletes folders of this instance's scratch that no recording it holds refers to (a crash between steps leaves them). */
  async #removeStrays(): Promise<void> {
    const keep = new Set((await this.#o.repo.held(this.#o.parts.holder)).map((r) => r.browserId));
    for (const name of fs.readdirSync(this.#o.parts.dir)) {
      if (!keep.has(name)) fs.rmSync(path.join(this.#o.parts.dir, name), { recursive: true, force: true });
    }
  }

  /** Removes the scratch of other instances on this disk that have been gone for long (never a live one's). */
  async #removeLongGone(): Promise<void> {
    const root = this.#o.settings.dir;
    const others = fs.readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== this.#o.parts.holder.instanceId).map((d) => d.name);
    for (const id of await this.#o.repo.longGone(others, SCRATCH_KEPT_MS)) {
      reapOrphanEncoders(path.join(root, id), this.#o.logger);
      fs.rmSync(path.join(root, id), { recursive: true, force: true });
      this.#o.logger.info({ instanceId: id }, 'scratch of an instance gone for long removed');
    }
  }

  /** Another replica took the recording over: stop writing it, keeping nothing. */
  #lost(browserId: string): void {
    const rec = this.#active.get(browserId);
    if (!rec) return;
    this.#active.delete(browserId);
    this.#o.logger.warn({ browserId }, 'recording taken over by another replica; this one stops writing it');
    void this.#lane(browserId, async () => {
      await rec.abandon();
      await this.#o.parts.clear(browserId);
    });
  }

  onStarted(e: BrowserEvent): void {
    this.#lane(e.browserId, () => this.#starts.run(() => this.#started(e)));
  }

  onStopped(e: BrowserEvent): void {
    this.#lane(e.browserId, () => this.#stopped(e.browserId, e.tsMs, e.projectId));
  }

  /** Runs per-browser work in order (a stop never overtakes its start). */
  #lane(browserId: string, fn: () => Promise<void>): Promise<void> {
    const prev = this.#lanes.get(browserId) ?? Promise.resolve();
    const next = prev
      .then(() => (this.#stopping ? undefined : fn()))
      .catch(async (err) => {
        this.#o.logger.error({ err, browserId }, 'recording step failed; letting its lease go so that it is taken over and tried again');
        await this.#o.repo.letGo(this.#o.parts.holder, browserId).catch(() => undefined);
      });
    this.#lanes.set(browserId, next);
    void next.finally(() => {
      if (this.#lanes.get(browserId) === next) this.#lanes.delete(browserId);
    });
    return next;
  }

  async #started(e: BrowserEvent): Promise<void> {
    if (this.#active.has(e.browserId)) return;
    // A shared NATS may carry another deployment's browsers: record only what our pool knows.
    const b = await this.#getBrowserPatiently(e.projectId, e.browserId);
    if (b) await this.#adopt(b);
  }

  /** Records a browser of the pool from its creation: follows it while active, else a still picture for its life. */
  async #adopt(b: Browser): Promise<void> {
    if (this.#active.has(b.id)) return;
    const createdMs = Date.parse(b.createdAt);
    const startMs = Math.max(Number.isFinite(createdMs) ? createdMs : this.#now(), this.#now() - (this.#o.maxGapMs ?? 4 * 3600_000));
    if (!(await this.#o.repo.claim({ browserId: b.id, projectId: b.projectId, startedAtMs: startMs }, this.#o.parts.holder, this.#o.leases.leaseMs))) {
      const row = await this.#o.repo.get(b.id);
      if (row?.state === 'recording' && (await this.#o.repo.holds(this.#o.parts.holder, b.id))) await this.#resume(row);
      return;
    }
    const screen = screenOf(b, this.#o.settings);
    if (isActive(b)) {
      // The pool's clock is learnt from the frames (its creation time says nothing of the clock now).
      this.#begin({ browserId: b.id, projectId: b.projectId, startMs, size: undefined, screen, seq: 1 });
      this.#o.logger.info({ browserId: b.id, lateMs: Math.max(0, this.#now() - startMs) }, 'recording started');
      return;
    }
    // It stopped before anyone recorded it: its video is one still picture for its whole life.
    const stopMs = Math.max(startMs, b.stoppedAt ? Date.parse(b.stoppedAt) : startMs);
    await this.#pad({ browserId: b.id, projectId: b.projectId, size: undefined, screen, startMs, seq: 1 }, stopMs);
    if (await this.#o.repo.markStopped(this.#o.parts.holder, b.id, stopMs)) this.#o.finalizer.enqueue(b.id);
    this.#o.logger.info({ browserId: b.id, wallMs: stopMs - startMs }, 'browser stopped before it was recorded; a still picture stands for it');
  }

  /** Writes one still picture (the seed, else black) from `startMs` to `stopMs` as a part. */
  async #pad(r: { browserId: string; projectId: string; size: { width: number; height: number } | undefined; screen: { width: number; height: number } | undefined; startMs: number; seq: number; seed?: Buffer | undefined }, stopMs: number): Promise<void> {
    const pad = new BrowserRecording({ ...r, repo: this.#o.repo, parts: this.#o.parts, source: this.#o.source, settings: this.#o.settings, logger: this.#o.logger, follow: false });
    await pad.end(stopMs);
  }

  /** GetBrowser, retried a few times while the pool is briefly unreachable. */
  async #getBrowserPatiently(projectId: string, browserId: string) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#o.source.getBrowser(projectId, browserId);
      } catch (err) {
        if (!(err instanceof RemoteError) || attempt >= 4 || this.#stopping) throw err;
        await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
      }
    }
  }

  #begin(r: { browserId: string; projectId: string; startMs: number; size: { width: number; height: number } | undefined; screen?: { width: number; height: number } | undefined; seq: number; seed?: Buffer | undefined }): BrowserRecording {
    const rec = new BrowserRecording({
      ...r,
      repo: this.#o.repo,
      parts: this.#o.parts,
      source: this.#o.source,
      settings: this.#o.settings,
      logger: this.#o.logger,
      follow: true,
      now: this.#now,
      onFeedEnded: (end) => this.#feedEnded(r.browserId, rec, end),
    });
    this.#active.set(r.browserId, rec);
    return rec.start();
  }

  #feedEnded(browserId: string, rec: BrowserRecording, end: FeedEnd): void {
    // The stopped event normally comes too; whichever is first ends the recording.
    const stopMs = end.reason === 'stopped' && end.stoppedAtMs ? end.stoppedAtMs : rec.lastSeenMs;
    this.#lane(browserId, () => this.#stopped(browserId, stopMs));
  }

  async #stopped(browserId: string, stopMs: number, projectId?: string): Promise<void> {
    const rec = this.#active.get(browserId);
    if (rec) {
      this.#active.delete(browserId);
      await rec.end(stopMs);
    } else {
      const row = await this.#o.repo.get(browserId);
      if (!row && projectId) {
        // Stopped before we heard it start (or the start was lost): it still gets its recording.
        const b = await this.#getBrowserPatiently(projectId, browserId);
        if (b) await this.#adopt(b);
        return;
      }
      // Another replica's (its holder ends it), or one whose holder died (whoever takes it over ends it).
      if (row?.state !== 'recording' || !(await this.#o.repo.holds(this.#o.parts.holder, browserId))) return;
    }
    if (await this.#o.repo.markStopped(this.#o.parts.holder, browserId, stopMs)) {
      this.#o.logger.info({ browserId, frames: rec?.framesWritten }, 'recording stopped; finalising');
      this.#o.finalizer.enqueue(browserId);
    }
  }

  /** Carries on a recording this process now holds, which another (or an earlier) process left unfinished. */
  async #resume(row: RecordingRow): Promise<void> {
    if (this.#active.has(row.browserId)) return;
    if (row.state === 'finalizing') return this.#complete(row);
    let b;
    try {
      b = await this.#o.source.getBrowser(row.projectId, row.browserId);
    } catch (err) {
      if (!(err instanceof RemoteError)) throw err;
      this.#o.logger.warn({ browserId: row.browserId, code: err.code }, 'pool not reachable; resuming the recording later');
      const t = setTimeout(() => {
        this.#resumeTimers.delete(t);
        void this.#lane(row.browserId, () => this.#resume(row));
      }, 2000);
      this.#resumeTimers.add(t);
      return;
    }
    const recorded = await this.#recorded(row);
    if (!recorded) return;
    const { endMs, seed, nextSeq } = recorded;
    if (isActive(b)) {
      const startMs = Math.max(endMs, this.#now() - (this.#o.maxGapMs ?? 4 * 3600_000));
      this.#begin({ browserId: row.browserId, projectId: row.projectId, startMs, size: sizeOf(row), seq: nextSeq, seed });
      this.#o.logger.info({ browserId: row.browserId, gapMs: Math.max(0, this.#now() - endMs) }, 'recording resumed');
      return;
    }
    // It stopped while nobody recorded: show the last frame (black when there was none) until it stopped, then finalise.
    const stopMs = b?.stoppedAt ? Date.parse(b.stoppedAt) : endMs;
    if (stopMs > endMs) {
      const screen = b ? screenOf(b, this.#o.settings) : undefined;
      await this.#pad({ browserId: row.browserId, projectId: row.projectId, size: sizeOf(row), screen, startMs: endMs, seed, seq: nextSeq }, Math.min(stopMs, endMs + (this.#o.maxGapMs ?? 4 * 3600_000)));
    }
    if (await this.#o.repo.markStopped(this.#o.parts.holder, row.browserId, stopMs)) this.#o.finalizer.enqueue(row.browserId);
  }

  /** A stopped recording this process now holds: what its holder did not store is filled with the last picture up to the stop, then it is finalised. */
  async #complete(row: RecordingRow): Promise<void> {
    const recorded = await this.#recorded(row);
    if (!recorded) return;
    const stopMs = row.stoppedAtMs ?? recorded.endMs;
    // Less than a tick short is rounding, not a gap.
    if (stopMs - recorded.endMs >= 1000 / this.#o.settings.fps) {
      await this.#pad({ browserId: row.browserId, projectId: row.projectId, size: sizeOf(row), screen: undefined, startMs: recorded.endMs, seed: recorded.seed, seq: recorded.nextSeq }, stopMs);
    }
    this.#o.finalizer.enqueue(row.browserId);
  }

  /**
   * Where the recording's parts end, its last picture, and the next part's number. Counted are
   * the parts in order up to the first that is nowhere (lost with a holder that died before
   * storing it); a part an earlier process of this instance left here unstored is stored now.
   * The parts after that are dropped: the gap shows the last picture. Undefined when this process
   * no longer holds the recording.
   */
  async #recorded(row: RecordingRow): Promise<{ endMs: number; seed: Buffer | undefined; nextSeq: number } | undefined> {
    const { repo, parts: store } = this.#o;
    const parts = await repo.parts(row.browserId);
    const nextSeq = (parts.at(-1)?.seq ?? 0) + 1;
    let endMs = row.startedAtMs;
    let last: (typeof parts)[number] | undefined;
    let kept = 0;
    for (const p of parts) {
      const durationMs = p.stored ? p.durationMs : await store.recover(row.projectId, p);
      if (durationMs === null || durationMs === undefined || !(durationMs > 0)) break;
      endMs = p.startMs + durationMs;
      last = p;
      kept++;
    }
    const lost = parts.slice(kept);
    if (lost.length) {
      if (!(await repo.dropParts(store.holder, row.browserId, lost.map((p) => p.seq)))) return undefined;
      await store.discard(row.projectId, row.browserId, lost);
      this.#o.logger.warn({ browserId: row.browserId, parts: lost.length }, 'parts lost with their writer; the last picture stands for their time');
    }
    if (!last) return { endMs, seed: undefined, nextSeq };
    const file = await store.localFile(row.projectId, last);
    const seed = file ? await this.#o.ffmpeg.lastFrame(file, path.join(store.browserDir(row.browserId), 'last-frame.jpg')) : undefined;
    return { endMs, seed, nextSeq };
  }

  /**
   * The recording of a browser as GetRecording reports it. A browser of the pool this service
   * has not taken on yet (between two looks at the pool) is taken on now.
   */
  async status(projectId: string, browserId: string, adopt: boolean): Promise<RecordingStatus | undefined> {
    // One this process records now is answered without the database (whose one connection a burst of recordings keeps busy).
    const rec = this.#active.get(browserId);
    if (rec) return rec.projectId === projectId ? { state: 'recording', projectId, objectKey: null } : undefined;
    const row = await this.#o.repo.get(browserId);
    if (row) return row.projectId === projectId ? row : undefined;
    if (!adopt || this.#stopping) return undefined;
    const b = await this.#o.source.getBrowser(projectId, browserId);
    if (!b) return undefined;
    await this.#lane(browserId, () => this.#adopt(b));
    const adopted = await this.#o.repo.get(browserId);
    return adopted?.projectId === projectId ? adopted : undefined;
  }

  /**
   * Stops following events and taking over, and closes and stores every part; recordings stay
   * `recording`, for whoever takes their leases once this process lets go of them. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#o.leases.stopTakingOver();
      this.#unsubscribe?.();
      clearTimeout(this.#reconcileTimer);
      for (const t of this.#resumeTimers) clearTimeout(t);
      this.#resumeTimers.clear();
      await Promise.allSettled([...this.#lanes.values()]);
      await Promise.allSettled([...this.#active.values()].map((r) => r.halt()));
      this.#active.clear();
    })();
    return this.#stopping;
  }
}

/** The browser's screen fitted to the recording's bounds; undefined when the pool gave none. */
function screenOf(b: Browser, s: RecordingSettings): { width: number; height: number } | undefined {
  return b.screenWidth > 0 && b.screenHeight > 0 ? fitEven(b.screenWidth, b.screenHeight, s.maxWidth, s.maxHeight) : undefined;
}

function sizeOf(row: RecordingRow): { width: number; height: number } | undefined {
  return row.width && row.height ? { width: row.width, height: row.height } : undefined;
}
