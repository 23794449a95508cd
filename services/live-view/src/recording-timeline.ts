/**
 * Places frames that come only when the screen changes on a video of variable frame rate whose
 * length is wall time. Time is cut in ticks (start + k/fps); tick k shows the newest frame whose
 * timestamp is not after it, but only the ticks where the picture changes are written, so a still
 * screen costs nothing to encode. The first frame (or the seed, when a part continues an earlier
 * one) shows from tick 0; `finish` writes the last picture once more at the last tick, so the
 * video lasts up to the stop.
 *
 * With `parts`, the video is cut into parts of at least `parts.ticks`: a part ends where the next
 * frame is written once it is long enough (the last picture written once more on the tick before,
 * so it lasts up to the cut), or, on a still screen, where `split` is told time has surely passed.
 * Only a part that shows something new is cut: one that only repeats the previous part's closing
 * picture goes on (a takeover fills a lost part with that picture anyway). Joined end to end the parts last as long as the whole. Pure: it only says what to write, and at
 * which tick, and where parts begin.
 */
/** Receives one frame, on screen from tick `tick` until the next frame written. */
export type FrameWriter = (jpeg: Buffer, tick: number) => void;

/** Where the video is cut into parts: each at least `ticks` long; `cut(tick)` is told before the first frame of the next part is written. */
export interface PartCuts {
  ticks: number;
  cut(tick: number): void;
}

export class Timeline {
  readonly startMs: number;
  readonly fps: number;
  readonly #parts: PartCuts | undefined;
  /** The current part's first tick. */
  #partStart = 0;
  /** The current part shows something new (not only the last part's closing picture again). */
  #partNews = false;
  /** The newest frame, not written yet, and the tick it shows from. */
  #pending: { jpeg: Buffer; tick: number } | undefined;
  #last: Buffer | undefined;
  #lastTick = -1;
  /** Ticks before this one are written and final. */
  #settled = 0;
  #frames = 0;

  constructor(startMs: number, fps: number, seed?: Buffer, parts?: PartCuts) {
    this.startMs = startMs;
    this.fps = fps;
    this.#parts = parts;
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
    this.#pending = undefined;
    if (this.#parts && this.#last && this.#partNews && p.tick - this.#partStart >= this.#parts.ticks) this.#cut(p.tick, write);
    this.#emit(p.jpeg, p.tick, write);
    this.#partNews = true;
  }

  #emit(jpeg: Buffer, tick: number, write: FrameWriter): void {
    write(jpeg, tick);
    this.#last = jpeg;
    this.#lastTick = tick;
    this.#frames++;
  }

  /** Ends the part before `tick` (the last picture lasting up to it); the next frame written begins the next part. */
  #cut(tick: number, write: FrameWriter): void {
    if (this.#lastTick < tick - 1) this.#emit(this.#last!, tick - 1, write);
    this.#parts!.cut(tick);
    this.#partStart = tick;
    this.#partNews = false;
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

  /**
   * A still screen: cuts the part that is due by `surelyPastMs` (a moment the browser surely
   * lived to), showing the last picture again as the next part's first frame, on a tick that
   * ends by then, so that the video never runs past the stop. True when it cut. A part that shows
   * only the previous part's closing picture is not cut (whoever takes the recording over fills
   * it with that picture anyway): a still screen costs one part, not one every part's length.
   */
  split(surelyPastMs: number, write: FrameWriter): boolean {
    const tick = Math.min(this.#settled, Math.floor(((surelyPastMs - this.startMs) * this.fps) / 1000 + 1e-9) - 1);
    if (!this.#parts || !this.#last || !this.#partNews || tick <= this.#lastTick || tick - this.#partStart < this.#parts.ticks) return false;
    this.#cut(tick, write);
    // A frame due on that very tick begins the part itself.
    if (this.#pending?.tick !== tick) this.#emit(this.#last, tick, write);
    return true;
  }

  /** Ends the video at `tsMs` (rounded to the nearest tick, at least one tick long), showing the last frame up to then. */
  finish(tsMs: number, write: FrameWriter): void {
    const end = Math.max(1, Math.round(((tsMs - this.startMs) * this.fps) / 1000));
    this.#writePending(end, write);
    if (this.#last && this.#lastTick < end - 1) this.#emit(this.#last, end - 1, write);
  }
}
