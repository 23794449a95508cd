/**
 * One browser being recorded by this process: its frame feed (purpose `recording`) drives a
 * Timeline, whose frames go to a PartEncoder. The part's file and start are recorded in the
 * database as soon as it starts, so whatever it writes survives a crash of this process.
 * A frame is written once the next tick has passed (by the pool's clock, as estimated from the
 * frames), so a crash loses only the last moment. A browser that never showed a frame is a
 * black picture for its whole life.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import type { StreamFramesResponse } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { FrameFeed, type FeedEnd } from './frame-feed.js';
import { fitEven, jpegSize } from './jpeg-size.js';
import { PartEncoder, type EncoderSettings } from './part-encoder.js';
import type { FrameSource } from './pool-client.js';
import type { RecordingRepository } from './recording.repository.js';
import { Timeline } from './recording-timeline.js';

export interface RecordingSettings extends EncoderSettings {
  /** Root of the parts (one folder per browser). */
  dir: string;
  maxWidth: number;
  maxHeight: number;
}

export interface BrowserRecordingOptions {
  browserId: string;
  projectId: string;
  /** Output size fixed by an earlier part; unset = taken from the first frame. */
  size: { width: number; height: number } | undefined;
  /** The browser's screen: the size of a recording that never got a frame. */
  screen?: { width: number; height: number } | undefined;
  repo: RecordingRepository;
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
  #db: Promise<void> = Promise.resolve();
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
    this.#timeline = new Timeline(o.startMs, o.settings.fps, o.seed);
  }

  /** The latest moment of the browser this recording knows of (pool clock). */
  get lastSeenMs(): number {
    return Math.max(this.#lastFrameMs, this.#timeline.endMs);
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
  }

  readonly #write = (jpeg: Buffer, tick: number): void => {
    if (this.#encoder?.failed) this.#nextPart();
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
      this.#persist(() => this.#o.repo.setSize(this.browserId, width, height));
    }
    const dir = path.join(this.#o.settings.dir, this.browserId);
    fs.mkdirSync(dir, { recursive: true });
    const seq = this.#seq;
    const file = path.join(dir, `part-${String(seq).padStart(5, '0')}.ts`);
    const startMs = this.#timeline.tickMs(tick);
    this.#partTick = tick;
    this.#persist(() => this.#o.repo.addPart({ browserId: this.browserId, seq, startMs, fps: this.#o.settings.fps, file }));
    return new PartEncoder({ ...this.#o.settings, file, ...this.#size, logger: this.#log });
  }

  /** ffmpeg died: what it wrote stays a part; the next frames go to a new one. */
  #nextPart(): void {
    this.#encoder = undefined;
    this.#seq++;
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
    await this.#encoder?.finish(60000);
    await this.#db;
  }

  /** This process is stopping: closes the part cleanly; the row stays `recording` for the next process. */
  async halt(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#stopInputs();
    if (this.#clockOffset !== -Infinity) this.#timeline.advanceTo(this.#now() + this.#clockOffset, this.#write);
    await this.#encoder?.finish(5000);
    await this.#db;
  }

  #stopInputs(): void {
    clearInterval(this.#flush);
    this.#feed?.stop();
  }
}
