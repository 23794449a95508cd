/**
 * Places frames that come only when the screen changes on a video of variable frame rate whose
 * length is wall time. Time is cut in ticks (start + k/fps); tick k shows the newest frame whose
 * timestamp is not after it, but only the ticks where the picture changes are written, so a still
 * screen costs nothing to encode. The first frame (or the seed, when a part continues an earlier
 * one) shows from tick 0; `finish` writes the last picture once more at the last tick, so the
 * video lasts up to the stop. Pure: it only says what to write, and at which tick.
 */

/** Receives one frame, on screen from tick `tick` until the next frame written. */
export type FrameWriter = (jpeg: Buffer, tick: number) => void;

export class Timeline {
  readonly startMs: number;
  readonly fps: number;
  /** The newest frame, not written yet, and the tick it shows from. */
  #pending: { jpeg: Buffer; tick: number } | undefined;
  #last: Buffer | undefined;
  #lastTick = -1;
  /** Ticks before this one are written and final. */
  #settled = 0;
  #frames = 0;

  constructor(startMs: number, fps: number, seed?: Buffer) {
    this.startMs = startMs;
    this.fps = fps;
    if (seed) this.#pending = { jpeg: seed, tick: 0 };
  }

  /** Frames written so far. */
  get frames(): number {
    return this.#frames;
  }

  /** The moment the video written so far ends (its last frame lasting one tick). */
  get endMs(): number {
    return this.tickMs(this.#lastTick + 1);
  }

  get hasFrame(): boolean {
    return this.#pending !== undefined || this.#last !== undefined;
  }

  /** The moment tick `tick` shows. */
  tickMs(tick: number): number {
    return this.startMs + (tick * 1000) / this.fps;
  }

  /** Ticks strictly before `ms`. */
  #ticksBefore(ms: number): number {
    return Math.max(0, Math.ceil(((ms - this.startMs) * this.fps) / 1000 - 1e-9));
  }

  #writePending(before: number, write: FrameWriter): void {
    this.#settled = Math.max(this.#settled, before);
    const p = this.#pending;
    if (!p || p.tick >= before) return;
    write(p.jpeg, p.tick);
    this.#last = p.jpeg;
    this.#lastTick = p.tick;
    this.#frames++;
    this.#pending = undefined;
  }

  /** A frame on screen from `tsMs`. */
  frame(jpeg: Buffer, tsMs: number, write: FrameWriter): void {
    // Nothing earlier to show: the first frame fills the start.
    const tick = this.hasFrame ? Math.max(this.#ticksBefore(tsMs), this.#lastTick + 1, this.#settled) : 0;
    this.#writePending(tick, write);
    // Two frames for one tick: the newer one is shown.
    this.#pending = { jpeg, tick: Math.max(tick, this.#pending?.tick ?? 0) };
  }

  /** Nothing before `tsMs` will change any more: writes the frame shown then, if it is new. */
  advanceTo(tsMs: number, write: FrameWriter): void {
    this.#writePending(this.#ticksBefore(tsMs), write);
  }

  /** Ends the video at `tsMs` (rounded to the nearest tick, at least one tick long), showing the last frame up to then. */
  finish(tsMs: number, write: FrameWriter): void {
    const end = Math.max(1, Math.round(((tsMs - this.startMs) * this.fps) / 1000));
    this.#writePending(end, write);
    if (this.#last && this.#lastTick < end - 1) {
      write(this.#last, end - 1);
      this.#lastTick = end - 1;
      this.#frames++;
    }
  }
}
