/**
 * Turns a stopped browser's parts into its MP4: gather them (those written here from scratch,
 * the others from object storage), join them (no re-encoding, index up front), store the file in
 * file-storage, then mark the recording ready (with its `recording.ready` webhook event, in one
 * transaction) and delete the parts. Only the lease's holder does
 * it, and each step can be repeated, so a crash anywhere leads to the same result once the lease
 * is taken over; the row only says `ready` once the MP4 is stored. A few at a time; failures are
 * retried with backoff.
 */
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import type { Ffmpeg } from './ffmpeg.js';
import type { PartStore } from './part-store.js';
import type { ReadyWrite, RecordingRepository, RecordingRow } from './recording.repository.js';
import { recordingKey, type RecordingStore } from './recording-store.js';

/** The `recording.ready` event could not be prepared (the pool or file-storage did not answer): tried again, never given up on. */
class AnnounceError extends Error {
  constructor(cause: unknown) {
    super(`recording.ready not prepared: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = this.constructor.name;
  }
}

export interface FinalizerOptions {
  repo: RecordingRepository;
  store: RecordingStore;
  ffmpeg: Ffmpeg;
  /** The parts, and this instance's scratch folder. */
  parts: PartStore;
  concurrency: number;
  logger: Logger;
  /**
   * Prepares the `recording.ready` event of a recording stored at `objectKey` (undefined: none),
   * written in the transaction that marks it ready. A failure is a failed attempt, retried with
   * the backoff but never given up on (the recording is not failed for the pool being away).
   */
  announceReady?: (row: RecordingRow, objectKey: string) => Promise<ReadyWrite | undefined>;
  maxAttempts?: number;
  retryBaseMs?: number;
}

export class Finalizer {
  readonly #o: FinalizerOptions;
  readonly #queue: string[] = [];
  readonly #running = new Map<string, Promise<void>>();
  readonly #retries = new Map<string, NodeJS.Timeout>();
  #stopped = false;

  constructor(options: FinalizerOptions) {
    this.#o = options;
  }

  /** Queues a `finalizing` recording (once, however often it is asked). */
  enqueue(browserId: string): void {
    if (this.#stopped || this.#running.has(browserId) || this.#queue.includes(browserId)) return;
    clearTimeout(this.#retries.get(browserId));
    this.#retries.delete(browserId);
    this.#queue.push(browserId);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped && this.#running.size < this.#o.concurrency && this.#queue.length) {
      const id = this.#queue.shift()!;
      const job = this.#attempt(id).finally(() => {
        this.#running.delete(id);
        this.#pump();
      });
      this.#running.set(id, job);
    }
  }

  async #attempt(browserId: string): Promise<void> {
    const log = this.#o.logger.child({ browserId });
    try {
      await this.finalize(browserId);
    } catch (err) {
      if (this.#stopped) return; // killed by stop(); the next process picks it up
      const message = err instanceof Error ? err.message : String(err);
      const attempts = await this.#o.repo.recordAttempt(this.#o.parts.holder, browserId, message).catch(() => Number.MAX_SAFE_INTEGER);
      if (attempts === undefined) return; // another replica holds it now
      // A video that is stored but not yet announced is not failed: it waits (409) for the pool.
      if (attempts >= (this.#o.maxAttempts ?? 8) && !(err instanceof AnnounceError)) {
        log.error({ err, attempts }, 'recording could not be stored; giving up');
        // Its parts go only when this process still held it (another replica may have taken it over).
        if (await this.#o.repo.markEnded(this.#o.parts.holder, browserId, 'failed', message).catch(() => false)) {
          await this.#cleanup((await this.#o.repo.get(browserId).catch(() => undefined))?.projectId, browserId);
        }
        return;
      }
      const wait = Math.min((this.#o.retryBaseMs ?? 1000) * 2 ** (attempts - 1), 60000);
      log.warn({ err: message, attempts, retryInMs: wait }, 'recording not stored yet; retrying');
      this.#retries.set(
        browserId,
        setTimeout(() => {
          this.#retries.delete(browserId);
          this.enqueue(browserId);
        }, wait),
      );
    }
  }

  /** Joins, stores and marks one recording ready, when this process holds it. Safe to repeat. */
  async finalize(browserId: string): Promise<void> {
    const { repo, parts, holder } = { ...this.#o, holder: this.#o.parts.holder };
    const row = await repo.get(browserId);
    if (!row || row.state !== 'finalizing' || !(await repo.holds(holder, browserId))) return;
    const usable: string[] = [];
    for (const p of await repo.parts(browserId)) {
      const file = await parts.localFile(row.projectId, p);
      // A stored part had frames when it was stored (an empty one is dropped then): only a part never stored is probed.
      if (file && ((p.stored && (p.durationMs ?? 0) > 0) || (await this.#o.ffmpeg.countFrames(file)) > 0)) usable.push(file);
    }
    if (!usable.length) {
      if (await repo.markEnded(holder, browserId, 'empty')) await this.#cleanup(row.projectId, browserId);
      this.#o.logger.info({ browserId }, 'browser showed nothing; no recording');
      return;
    }
    const dir = parts.browserDir(browserId);
    const out = path.join(dir, 'recording.mp4');
    await this.#o.ffmpeg.concat(usable, path.join(dir, 'parts.txt'), out);
    const durationMs = await this.#o.ffmpeg.durationMs(out);
    const key = recordingKey(browserId);
    const { sizeBytes } = await this.#o.store.put(row.projectId, key, out);
    const event = await this.#o.announceReady?.(row, key).catch((err: unknown) => Promise.reject(new AnnounceError(err)));
    if (!(await repo.markReady(holder, browserId, { objectKey: key, sizeBytes, durationMs }, event))) {
      this.#o.logger.warn({ browserId }, 'recording taken over while it was being stored; its holder finishes it');
      return;
    }
    await this.#cleanup(row.projectId, browserId);
    this.#o.logger.info({ browserId, durationMs, sizeBytes, parts: usable.length }, 'recording stored');
  }

  /** The recording is over: its parts go from object storage, scratch and the table (`projectId` unknown: scratch only). */
  async #cleanup(projectId: string | undefined, browserId: string): Promise<void> {
    const { repo, parts } = this.#o;
    if (projectId) await parts.discard(projectId, browserId, await repo.parts(browserId)).catch(() => {});
    await parts.clear(browserId);
    await repo.deleteParts(browserId).catch(() => {});
  }

  /** Stops taking work and waits up to `timeoutMs` for running jobs (the caller kills ffmpeg after). Idempotent. */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopped = true;
    this.#queue.length = 0;
    for (const t of this.#retries.values()) clearTimeout(t);
    this.#retries.clear();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#running.values()]), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }
}
