/**
 * The parts of recordings between this instance's scratch folder and object storage. A part is
 * stored as soon as its encoder finished, so a replica taking a recording over loses at most
 * the part that was being written; whoever finalises fetches the parts it does not have.
 * Scratch is per instance (`<recordingDir>/<instance id>/<browser id>/`): no replica reads or
 * removes another's files.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import type { Ffmpeg } from './ffmpeg.js';
import type { Holder, PartRow, RecordingRepository } from './recording.repository.js';
import type { RecordingStore } from './recording-store.js';

/** The scratch folder of one instance under the recordings folder. */
export function scratchDir(recordingDir: string, instanceId: string): string {
  return path.join(recordingDir, instanceId);
}

export interface PartStoreOptions {
  repo: RecordingRepository;
  store: RecordingStore;
  ffmpeg: Ffmpeg;
  holder: Holder;
  /** This instance's scratch folder. */
  dir: string;
  logger: Logger;
}

export class PartStore {
  readonly holder: Holder;
  readonly dir: string;
  readonly #o: PartStoreOptions;

  constructor(o: PartStoreOptions) {
    this.#o = o;
    this.holder = o.holder;
    this.dir = o.dir;
  }

  /** The folder of one browser's files here. */
  browserDir(browserId: string): string {
    return path.join(this.dir, browserId);
  }

  /** This instance wrote the part (parts of before leases name no writer: their path is all there is). */
  #wroteHere(p: PartRow): boolean {
    return p.instanceId === null || p.instanceId === this.holder.instanceId;
  }

  #fetched(p: PartRow): string {
    return path.join(this.browserDir(p.browserId), `fetched-${String(p.seq).padStart(5, '0')}.ts`);
  }

  /**
   * Stores a finished part and records its length. Resolves to the length, or undefined when the
   * part has no frame (it is forgotten) or the recording is no longer held here (the copy just
   * stored is removed: the successor owns the recording now). Rejects when storing failed.
   */
  async ship(projectId: string, p: { browserId: string; seq: number; file: string; objectKey: string }): Promise<number | undefined> {
    const { repo, store, ffmpeg, holder } = this.#o;
    const { frames, durationMs } = fs.existsSync(p.file) ? await ffmpeg.probe(p.file) : { frames: 0, durationMs: 0 };
    if (frames === 0) {
      fs.rmSync(p.file, { force: true });
      await repo.dropParts(holder, p.browserId, [p.seq]);
      return undefined;
    }
    const { sizeBytes } = await store.put(projectId, p.objectKey, p.file, 'video/mp2t');
    if (await repo.partStored(holder, p.browserId, p.seq, { durationMs, sizeBytes })) return durationMs;
    await store.remove(projectId, p.objectKey).catch(() => false);
    return undefined;
  }

  /**
   * A readable copy of the part here: the file this instance wrote, or one fetched from object
   * storage; undefined when it is nowhere (lost with a writer that died before storing it).
   */
  async localFile(projectId: string, p: PartRow): Promise<string | undefined> {
    if (this.#wroteHere(p) && nonEmpty(p.file)) return p.file;
    if (!p.stored || !p.objectKey) return undefined;
    const copy = this.#fetched(p);
    if (nonEmpty(copy)) return copy;
    fs.mkdirSync(path.dirname(copy), { recursive: true });
    await this.#o.store.get(projectId, p.objectKey, `${copy}.partial`);
    fs.renameSync(`${copy}.partial`, copy);
    return copy;
  }

  /**
   * A part not stored yet that this instance wrote and still has (a crash of an earlier process
   * of this instance): stored now. Resolves to its length; undefined when it is not here or empty.
   */
  async recover(projectId: string, p: PartRow): Promise<number | undefined> {
    if (!this.#wroteHere(p) || !nonEmpty(p.file) || !p.objectKey) return undefined;
    try {
      return await this.ship(projectId, { ...p, objectKey: p.objectKey });
    } catch (err) {
      // Not stored, but here: good enough for this instance; another would lose it.
      this.#o.logger.warn({ browserId: p.browserId, seq: p.seq, err: err instanceof Error ? err.message : err }, 'part recovered but not stored');
      const { frames, durationMs } = await this.#o.ffmpeg.probe(p.file);
      return frames > 0 ? durationMs : undefined;
    }
  }

  /** Removes parts from object storage (as far as it answers) and their files here. */
  async discard(projectId: string, browserId: string, parts: PartRow[]): Promise<void> {
    const removals = parts.filter((p) => p.objectKey).map((p) => this.#o.store.remove(projectId, p.objectKey!).then(() => 0, () => 1));
    const failed = (await Promise.all(removals)).reduce((a: number, b: number) => a + b, 0);
    if (failed) this.#o.logger.warn({ browserId, parts: failed }, 'parts left in object storage (it did not answer)');
    for (const p of parts) {
      if (this.#wroteHere(p)) fs.rmSync(p.file, { force: true });
      fs.rmSync(this.#fetched(p), { force: true });
    }
  }

  /** Removes the browser's scratch folder here. */
  async clear(browserId: string): Promise<void> {
    await fs.promises.rm(this.browserDir(browserId), { recursive: true, force: true });
  }
}

function nonEmpty(file: string): boolean {
  try {
    return fs.statSync(file).size > 0;
  } catch {
    return false;
  }
}
