/**
 * Records every browser from `ats.browser.<id>.started` to `.stopped`. A browser is claimed in
 * the database on its start (so it is recorded once, and resumed by this instance after a
 * restart); its end comes from the `stopped` event or, if that is lost, from its frame stream
 * ending with the pool saying it stopped. On start, recordings left `recording` are resumed
 * (the gap while nobody recorded shows the last frame, so the video still lasts wall time) or,
 * when their browser stopped meanwhile, closed and finalised; `finalizing` ones are finalised.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { NatsConnection } from '../../common/src/bus.js';
import { RemoteError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { BrowserRecording, type RecordingSettings } from './browser-recording.js';
import type { Ffmpeg } from './ffmpeg.js';
import type { FeedEnd } from './frame-feed.js';
import { reapOrphanEncoders } from './part-encoder.js';
import { isActive, type FrameSource } from './pool-client.js';
import type { RecordingRepository, RecordingRow } from './recording.repository.js';
import type { Finalizer } from './recording-finalizer.js';

export interface RecorderOptions {
  repo: RecordingRepository;
  source: FrameSource;
  finalizer: Finalizer;
  ffmpeg: Ffmpeg;
  settings: RecordingSettings;
  instanceId: string;
  logger: Logger;
  now?: () => number;
  /** Longest gap filled with the last frame when a recording resumes (longer ones are cut). */
  maxGapMs?: number;
}

interface BrowserEvent {
  browserId: string;
  projectId: string;
  tsMs: number;
}

/** Parses a browser lifecycle event; undefined when it is not one. */
export function parseBrowserEvent(subject: string, data: Uint8Array, now: number): { kind: 'started' | 'stopped'; event: BrowserEvent } | undefined {
  const m = /^ats\.browser\.([^.]+)\.(started|stopped)$/.exec(subject);
  if (!m) return undefined;
  try {
    const p = JSON.parse(Buffer.from(data).toString()) as { browserId?: unknown; projectId?: unknown; ts?: unknown };
    if (typeof p.projectId !== 'string' || !p.projectId || (p.browserId !== undefined && p.browserId !== m[1])) return undefined;
    const ts = typeof p.ts === 'string' ? Date.parse(p.ts) : NaN;
    return { kind: m[2] as 'started' | 'stopped', event: { browserId: m[1]!, projectId: p.projectId, tsMs: Number.isFinite(ts) ? ts : now } };
  } catch {
    return undefined;
  }
}

export class Recorder {
  readonly #o: RecorderOptions;
  readonly #now: () => number;
  readonly #active = new Map<string, BrowserRecording>();
  readonly #lanes = new Map<string, Promise<void>>();
  readonly #resumeTimers = new Set<NodeJS.Timeout>();
  #unsubscribe: (() => void) | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: RecorderOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Browsers being recorded by this process. */
  get activeCount(): number {
    return this.#active.size;
  }

  /** Cleans up after a predecessor, resumes its recordings and starts following lifecycle events. */
  async start(nc: NatsConnection | undefined): Promise<void> {
    fs.mkdirSync(this.#o.settings.dir, { recursive: true });
    reapOrphanEncoders(this.#o.settings.dir, this.#o.logger);
    await this.#removeStrays();
    if (nc) {
      const sub = nc.subscribe('ats.browser.*.*', {
        callback: (err, msg) => {
          if (err) return;
          const parsed = parseBrowserEvent(msg.subject, msg.data, this.#now());
          if (parsed?.kind === 'started') this.onStarted(parsed.event);
          else if (parsed?.kind === 'stopped') this.onStopped(parsed.event);
        },
      });
      this.#unsubscribe = () => sub.unsubscribe();
    }
    for (const row of await this.#o.repo.listByState(this.#o.instanceId, ['finalizing'])) this.#o.finalizer.enqueue(row.browserId);
    for (const row of await this.#o.repo.listByState(this.#o.instanceId, ['recording'])) this.#lane(row.browserId, () => this.#resume(row));
  }

  /** Deletes part folders no unfinished recording refers to (a crash between steps leaves them). */
  async #removeStrays(): Promise<void> {
    const keep = await this.#o.repo.unfinishedBrowserIds(this.#o.instanceId);
    for (const name of fs.readdirSync(this.#o.settings.dir)) {
      if (!keep.has(name)) fs.rmSync(path.join(this.#o.settings.dir, name), { recursive: true, force: true });
    }
  }

  onStarted(e: BrowserEvent): void {
    this.#lane(e.browserId, () => this.#started(e));
  }

  onStopped(e: BrowserEvent): void {
    this.#lane(e.browserId, () => this.#stopped(e.browserId, e.tsMs));
  }

  /** Runs per-browser work in order (a stop never overtakes its start). */
  #lane(browserId: string, fn: () => Promise<void>): Promise<void> {
    const prev = this.#lanes.get(browserId) ?? Promise.resolve();
    const next = prev.then(() => (this.#stopping ? undefined : fn())).catch((err) => this.#o.logger.error({ err, browserId }, 'recording step failed'));
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
    if (!isActive(b)) return;
    if (!(await this.#o.repo.claim({ browserId: e.browserId, projectId: e.projectId, instanceId: this.#o.instanceId, startedAtMs: e.tsMs }))) {
      const row = await this.#o.repo.get(e.browserId);
      if (row?.state === 'recording' && row.instanceId === this.#o.instanceId) await this.#resume(row);
      return;
    }
    this.#begin({ browserId: e.browserId, projectId: e.projectId, startMs: e.tsMs, size: undefined, seq: 1 }).observeClock(e.tsMs);
    this.#o.logger.info({ browserId: e.browserId }, 'recording started');
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

  #begin(r: { browserId: string; projectId: string; startMs: number; size: { width: number; height: number } | undefined; seq: number; seed?: Buffer | undefined }): BrowserRecording {
    const rec = new BrowserRecording({
      ...r,
      repo: this.#o.repo,
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

  async #stopped(browserId: string, stopMs: number): Promise<void> {
    const rec = this.#active.get(browserId);
    if (rec) {
      this.#active.delete(browserId);
      await rec.end(stopMs);
    } else {
      const row = await this.#o.repo.get(browserId);
      if (row?.state !== 'recording' || row.instanceId !== this.#o.instanceId) return;
    }
    if (await this.#o.repo.markStopped(browserId, stopMs)) {
      this.#o.logger.info({ browserId, frames: rec?.framesWritten }, 'recording stopped; finalising');
      this.#o.finalizer.enqueue(browserId);
    }
  }

  /** Picks up a recording an earlier process left `recording`. */
  async #resume(row: RecordingRow): Promise<void> {
    if (this.#active.has(row.browserId)) return;
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
    const { endMs, seed, nextSeq } = await this.#recorded(row);
    if (isActive(b)) {
      const startMs = Math.max(endMs, this.#now() - (this.#o.maxGapMs ?? 4 * 3600_000));
      this.#begin({ browserId: row.browserId, projectId: row.projectId, startMs, size: sizeOf(row), seq: nextSeq, seed });
      this.#o.logger.info({ browserId: row.browserId, gapMs: Math.max(0, this.#now() - endMs) }, 'recording resumed');
      return;
    }
    // It stopped while nobody recorded: show the last frame until it stopped, then finalise.
    const stopMs = b?.stoppedAt ? Date.parse(b.stoppedAt) : endMs;
    if (seed && stopMs > endMs) {
      const pad = new BrowserRecording({
        browserId: row.browserId,
        projectId: row.projectId,
        size: sizeOf(row),
        repo: this.#o.repo,
        source: this.#o.source,
        settings: this.#o.settings,
        logger: this.#o.logger,
        startMs: endMs,
        seed,
        seq: nextSeq,
        follow: false,
      });
      await pad.end(Math.min(stopMs, endMs + (this.#o.maxGapMs ?? 4 * 3600_000)));
    }
    if (await this.#o.repo.markStopped(row.browserId, stopMs)) this.#o.finalizer.enqueue(row.browserId);
  }

  /** Where the parts on disk end, their last frame, and the next part's number. Empty parts are dropped. */
  async #recorded(row: RecordingRow): Promise<{ endMs: number; seed: Buffer | undefined; nextSeq: number }> {
    const parts = await this.#o.repo.parts(row.browserId);
    const nextSeq = (parts.at(-1)?.seq ?? 0) + 1;
    for (const p of [...parts].reverse()) {
      const frames = fs.existsSync(p.file) ? await this.#o.ffmpeg.countFrames(p.file) : 0;
      if (frames === 0) {
        fs.rmSync(p.file, { force: true });
        await this.#o.repo.deletePart(row.browserId, p.seq);
        continue;
      }
      const seed = await this.#o.ffmpeg.lastFrame(p.file, path.join(path.dirname(p.file), 'last-frame.jpg'));
      return { endMs: p.startMs + (frames * 1000) / p.fps, seed, nextSeq };
    }
    return { endMs: row.startedAtMs, seed: undefined, nextSeq };
  }

  /**
   * The recording of a browser as GetRecording reports it. A browser the pool has active but
   * this service never heard of (a lost event) is adopted and recorded from now on.
   */
  async status(projectId: string, browserId: string, adopt: boolean): Promise<RecordingRow | undefined> {
    const row = await this.#o.repo.get(browserId);
    if (row) return row.projectId === projectId ? row : undefined;
    if (!adopt || this.#stopping) return undefined;
    const b = await this.#o.source.getBrowser(projectId, browserId);
    if (!isActive(b)) return undefined;
    await this.#lane(browserId, () => this.#started({ browserId, projectId, tsMs: this.#now() }));
    const adopted = await this.#o.repo.get(browserId);
    return adopted?.projectId === projectId ? adopted : undefined;
  }

  /** Stops following events and closes every part cleanly; recordings stay `recording` for the next process. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#unsubscribe?.();
      for (const t of this.#resumeTimers) clearTimeout(t);
      this.#resumeTimers.clear();
      await Promise.allSettled([...this.#lanes.values()]);
      await Promise.allSettled([...this.#active.values()].map((r) => r.halt()));
      this.#active.clear();
    })();
    return this.#stopping;
  }
}

function sizeOf(row: RecordingRow): { width: number; height: number } | undefined {
  return row.width && row.height ? { width: row.width, height: row.height } : undefined;
}
