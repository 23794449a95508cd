/**
 * Turns frames that come only when the screen changes into a constant-rate video whose length
 * is wall time: tick k (at start + k/fps) shows the newest frame whose timestamp is not after
 * it, so the last frame is repeated across gaps. Ticks before the first frame show the first
 * frame (or the seed, when a part continues an earlier one). Pure: it only says what to write.
 */

/** Receives `count` copies of one JPEG, in order. */
export type TickWriter = (jpeg: Buffer, count: number) => void;

export class Timeline {
  readonly startMs: number;
  readonly fps: number;
  #written = 0;
  #current: Buffer | undefined;

  constructor(startMs: number, fps: number, seed?: Buffer) {
    this.startMs = startMs;
    this.fps = fps;
    this.#current = seed;
  }

  /** Ticks written so far. */
  get ticks(): number {
    return this.#written;
  }

  /** The moment the video written so far ends. */
  get endMs(): number {
    return this.startMs + (this.#written * 1000) / this.fps;
  }

  get hasFrame(): boolean {
    return this.#current !== undefined;
  }

  /** Ticks strictly before `ms`. */
  #ticksBefore(ms: number): number {
    return Math.max(0, Math.ceil(((ms - this.startMs) * this.fps) / 1000 - 1e-9));
  }

  #fill(upTo: number, write: TickWriter): void {
    const n = upTo - this.#written;
    if (n <= 0 || !this.#current) return;
    write(this.#current, n);
    this.#written = upTo;
  }

  /** A frame on screen from `tsMs`: the ticks before it get what was on screen until then. */
  frame(jpeg: Buffer, tsMs: number, write: TickWriter): void {
    if (!this.#current) this.#current = jpeg; // nothing earlier to show: the first frame fills the start
    this.#fill(this.#ticksBefore(tsMs), write);
    this.#current = jpeg;
  }

  /** Nothing before `tsMs` will change any more: writes those ticks. */
  advanceTo(tsMs: number, write: TickWriter): void {
    this.#fill(this.#ticksBefore(tsMs), write);
  }

  /** Ends the video at `tsMs` (rounded to the nearest tick), repeating the last frame. */
  finish(tsMs: number, write: TickWriter): void {
    this.#fill(Math.max(0, Math.round(((tsMs - this.startMs) * this.fps) / 1000)), write);
  }
}
