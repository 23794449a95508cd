/**
 * One browser being recorded by this process: its frame feed (purpose `recording`) drives a
 * Timeline, whose frames go to a PartEncoder. The video is cut into parts of about `partMs`;
 * each part is recorded in the database as it starts and stored in object storage as soon as it
 * is finished, so a replica taking the recording over loses at most the part being written.
 * A frame is written once the next tick has passed (by the pool's clock, as estimated from the
 * frames). A browser that never showed a frame is a black picture for its whole life.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import type { StreamFramesResponse } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { FrameFeed, type FeedEnd } from './frame-feed.js';
import { fitEven, jpegSize } from './jpeg-size.js';
import { PartEncoder, type EncoderSettings } from './part-encoder.js';
import type { PartStore } from './part-store.js';
import type { FrameSource } from './pool-client.js';
import type { RecordingRepository } from './recording.repository.js';
import { partKey } from './recording-store.js';
import { Timeline } from './recording-timeline.js';

export interface RecordingSettings extends EncoderSettings {
  /** Root of the recordings in progress (one scratch folder per instance). */
  dir: string;
  maxWidth: number;
  maxHeight: number;
  /** A part is cut (and stored) once it lasts this long. */
  partMs: number;
}

export interface BrowserRecordingOptions {
  browserId: string;
  projectId: string;
  /** Output size fixed by an earlier part; unset = taken from the first frame. */
  size: { width: number; height: number } | undefined;
  /** The browser's screen: the size of a recording that never got a frame. */
  screen?: { width: number; height: number } | undefined;
  repo: RecordingRepository;
  /** Where finished parts go; its holder is the one writing. */
  parts: PartStore;
  source: FrameSource;
  settings: RecordingSettings;
  logger: Logger;
  /** Where this part's video begins (pool clock, ms). */
  startMs: number;
  /** What was on screen at startMs, when an earlier part showed it. */
  seed?: Buffer | undefined;
  /** Sequence number of the first part this recording writes. */
  seq: number;
  /** Open a frame feed; false only pads (a browser that stopped while nobody recorded it). */
  follow: boolean;
  /** The feed ended on its own: the browser stopped or is gone. */
  onFeedEnded?: (end: FeedEnd) => void;
  now?: () => number;
  /** How far behind the estimated pool clock frames are taken as final and written. */
  flushLagMs?: number;
}

/** A black 16×16 JPEG: what a browser that never sent a frame shows (scaled to its screen). */
export const BLACK_JPEG = Buffer.from(
  '/9j/4AAQSkZJRgABAgAAAQABAAD//gAQTGF2YzU5LjM3LjEwMAD/2wBDAAgUFBcUFxsbGxsbGyAeICEhISAgICAhISEkJCQqKiokJCQhISQkKCgqKi4vLisrKisvLzIyMjw8OTlGRkhWVmf/xABLAAEBAAAAAAAAAAAAAAAAAAAACAEBAAAAAAAAAAAAAAAAAAAAABABAAAAAAAAAAAAAAAAAAAAABEBAAAAAAAAAAAAAAAAAAAAAP/AABEIABAAEAMBIgACEQADEQD/2gAMAwEAAhEDEQA/AJ/AB//Z',
  'base64',
);

/** How far behind the pool's clock a still screen's part may be cut when the pool does not say every second that the browser lives. */
const OLD_POOL_SURELY_PAST_MS = 60_000;

/** Pool-clock estimates further off than this are treated as a bad clock and ignored. */
const MAX_CLOCK_LEAD_MS = 60_000;

export class BrowserRecording {
  readonly browserId: string;
  readonly #o: BrowserRecordingOptions;
  readonly #now: () => number;
  readonly #log: Logger;
  #timeline: Timeline;
  #encoder: PartEncoder | undefined;
  /** Tick of the current part's first frame. */
  #partTick = 0;
  #size: { width: number; height: number } | undefined;
  #seq: number;
  #feed: FrameFeed | undefined;
  #flush: NodeJS.Timeout | undefined;
  /** Estimated pool clock minus ours: the largest lead seen (fresh frames lag least). */
  #clockOffset = -Infinity;
  #lastFrameMs: number;
  /** The latest moment the pool said the browser lived (pool clock): never past its stop. */
  #aliveMs: number;
  /** The part being written. */
  #part: { seq: number; file: string; objectKey: string } | undefined;
  #abandoned = false;
  #db: Promise<void> = Promise.resolve();
  /** Finished parts being stored, one after the other. */
  #shipping: Promise<void> = Promise.resolve();
  #done = false;
  #dropped = 0;

  constructor(o: BrowserRecordingOptions) {
    this.#o = o;
    this.browserId = o.browserId;
    this.#now = o.now ?? Date.now;
    this.#log = o.logger.child({ browserId: o.browserId });
    this.#size = o.size;
    this.#seq = o.seq;
    this.#lastFrameMs = o.startMs;
    this.#aliveMs = o.startMs;
    // Only a followed recording is cut into parts (a pad is one still picture).
    const cuts = o.follow ? { ticks: Math.max(1, Math.round((o.settings.partMs * o.settings.fps) / 1000)), cut: () => this.#closePart(3) } : undefined;
    this.#timeline = new Timeline(o.startMs, o.settings.fps, o.seed, cuts);
  }

  /** The latest moment of the browser this recording knows of (pool clock). */
  get lastSeenMs(): number {
    return Math.max(this.#lastFrameMs, this.#timeline.endMs);
  }

  get projectId(): string {
    return this.#o.projectId;
  }

  get framesWritten(): number {
    return this.#timeline.frames;
  }

  start(): this {
    if (this.#o.follow) {
      this.#feed = new FrameFeed({
        source: this.#o.source,
        projectId: this.#o.projectId,
        browserId: this.browserId,
        purpose: 'recording',
        logger: this.#log,
        listener: { frame: (m) => this.#onFrame(m), ended: (end) => this.#o.onFeedEnded?.(end) },
      }).start();
      this.#flush = setInterval(() => this.#flushStill(), 1000);
      this.#flush.unref();
    }
    return this;
  }

  /** Learns what time the pool's clock showed just now (from a fresh frame). */
  #observeClock(poolMs: number): void {
    const lead = poolMs - this.#now();
    if (lead < MAX_CLOCK_LEAD_MS) this.#clockOffset = Math.max(this.#clockOffset, lead);
  }

  #onFrame(m: StreamFramesResponse): void {
    if (this.#done) return;
    if (m.timestampMs > 0) this.#observeClock(m.timestampMs);
    // The pool sends nothing stamped after the browser's stop.
    if (m.timestampMs - this.#now() < MAX_CLOCK_LEAD_MS) this.#aliveMs = Math.max(this.#aliveMs, m.timestampMs);
    if (!m.jpeg.length) return;
    // A frame stamped far ahead of any clock we know would stretch the video: place it at "now".
    const ts = m.timestampMs - this.#now() > MAX_CLOCK_LEAD_MS ? this.#now() + Math.max(0, this.#clockOffset) : m.timestampMs;
    this.#lastFrameMs = Math.max(this.#lastFrameMs, ts);
    if (this.#encoder?.backlogged) {
      // ffmpeg is behind: keep time running on the frame it has, let this one go.
      if (this.#dropped++ % 100 === 0) this.#log.warn({ dropped: this.#dropped }, 'encoder behind; frames dropped from the recording');
      this.#timeline.advanceTo(ts, this.#write);
      return;
    }
    this.#timeline.frame(m.jpeg, ts, this.#write);
  }

  #flushStill(): void {
    if (this.#done || this.#clockOffset === -Infinity) return;
    this.#timeline.advanceTo(this.#now() + this.#clockOffset - (this.#o.flushLagMs ?? 500), this.#write);
    // A still screen's part is cut no later than the pool last said the browser lived, so never past
    // its stop (a pool too old to say so every second: a minute behind its clock, surely still alive).
    this.#timeline.split(Math.max(this.#aliveMs, this.#now() + this.#clockOffset - OLD_POOL_SURELY_PAST_MS), this.#write);
  }

  readonly #write = (jpeg: Buffer, tick: number): void => {
    if (this.#encoder?.failed) this.#closePart(3);
    this.#encoder ??= this.#openPart(jpeg, tick);
    this.#encoder?.write(jpeg, ((tick - this.#partTick) * 1000) / this.#timeline.fps);
  };

  #openPart(firstJpeg: Buffer, tick: number): PartEncoder | undefined {
    if (!this.#size) {
      const px = firstJpeg === BLACK_JPEG && this.#o.screen ? this.#o.screen : jpegSize(firstJpeg);
      if (!px) {
        this.#log.warn('first frame is not a readable JPEG; waiting for the next');
        return undefined;
      }
      this.#size = fitEven(px.width, px.height, this.#o.settings.maxWidth, this.#o.settings.maxHeight);
      const { width, height } = this.#size;
      this.#persist(async () => void (await this.#o.repo.setSize(this.#o.parts.holder, this.browserId, width, height)));
    }
    const dir = this.#o.parts.browserDir(this.browserId);
    fs.mkdirSync(dir, { recursive: true });
    const seq = this.#seq;
    const file = path.join(dir, `part-${String(seq).padStart(5, '0')}.ts`);
    const startMs = this.#timeline.tickMs(tick);
    const objectKey = partKey(this.browserId, seq, this.#o.parts.holder.nonce);
    this.#partTick = tick;
    this.#part = { seq, file, objectKey };
    this.#persist(async () => {
      if (!(await this.#o.repo.addPart(this.#o.parts.holder, { browserId: this.browserId, seq, startMs, fps: this.#o.settings.fps, file, objectKey }))) {
        this.#log.warn({ seq }, 'recording held by another replica now; this part will not count');
      }
    });
    return new PartEncoder({ ...this.#o.settings, file, ...this.#size, logger: this.#log });
  }

  /**
   * The current part is finished (cut, or its ffmpeg died): once ffmpeg wrote the rest it is
   * stored, `attempts` times at most; the next frames go to a new part.
   */
  #closePart(attempts: number): void {
    const encoder = this.#encoder;
    const part = this.#part;
    this.#encoder = undefined;
    this.#part = undefined;
    this.#seq++;
    if (!encoder || !part) return;
    const finished = encoder.finish(60000);
    // After the part's row is written (#db), in order of the parts.
    const db = this.#db;
    this.#shipping = this.#shipping.then(async () => {
      await Promise.all([finished, db]);
      await this.#ship(part, attempts);
    });
  }

  async #ship(part: { seq: number; file: string; objectKey: string }, attempts: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#o.parts.ship(this.#o.projectId, { browserId: this.browserId, ...part });
        return;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (attempt >= attempts || this.#abandoned) {
          // Still here for this instance's finaliser; a replica taking over would not have it.
          this.#log.warn({ seq: part.seq, err: message }, 'part not stored; kept here');
          return;
        }
        await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
      }
    }
  }

  #persist(fn: () => Promise<void>): void {
    this.#db = this.#db.then(fn).catch((err) => this.#log.error({ err }, 'recording state not saved'));
  }

  /** The browser stopped at `stopMs`: writes the video up to then and closes the part. */
  async end(stopMs: number): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#stopInputs();
    if (!this.#timeline.hasFrame) this.#timeline.frame(BLACK_JPEG, this.#timeline.startMs, this.#write);
    this.#timeline.finish(stopMs, this.#write);
    this.#closePart(3);
    await this.#shipping;
    await this.#db;
  }

  /** This process is stopping: closes and stores the part; the row stays `recording` for whoever takes the lease. */
  async halt(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#stopInputs();
    if (this.#clockOffset !== -Infinity) this.#timeline.advanceTo(this.#now() + this.#clockOffset, this.#write);
    this.#closePart(1);
    await this.#shipping;
    await this.#db;
  }

  /** Another replica holds the recording now: stops at once, storing nothing more. */
  async abandon(): Promise<void> {
    this.#abandoned = true;
    this.#done = true;
    this.#stopInputs();
    const encoder = this.#encoder;
    this.#encoder = undefined;
    await encoder?.kill();
    await this.#shipping;
    await this.#db;
  }

  #stopInputs(): void {
    clearInterval(this.#flush);
    this.#feed?.stop();
  }
}
