/**
 * Bounds of a run's work that hold whatever a step is doing: the run's time limit, the loss of
 * its browser, and a grace after which work that ignores its abort is let go (its worker slot
 * freed) instead of holding the slot forever.
 */
import { LimitReached } from './agents/run-errors.js';

/** Why a run failed when its browser vanished under it (a pool restart or a browser crash). */
export const BROWSER_LOST_ERROR = 'The browser stopped unexpectedly (the browser service restarted or the browser crashed), so the run could not go on';

/** Why a run failed at its time limit. */
export const TIME_LIMIT_ERROR = 'Time limit reached before the task was finished';

/** The run's browser went away while the run used it. */
export class BrowserLost extends Error {
  constructor() {
    super(BROWSER_LOST_ERROR);
    this.name = this.constructor.name;
  }
}

/**
 * The signal a run's work obeys: it aborts when the run is stopped, when it reaches its time
 * limit, or when the service cuts it short (`cut`, e.g. its browser was lost). `cutShort` says
 * why the service ended it; it is undefined when the run was stopped by its user or not ended.
 */
export class RunGuard {
  readonly signal: AbortSignal;
  readonly #stop: AbortSignal;
  readonly #cut = new AbortController();
  readonly #timers: NodeJS.Timeout[];

  /** `overdue` is called when the work is still going `graceMs` after the time limit aborted it. */
  constructor(stop: AbortSignal, deadline: number, o: { graceMs: number; overdue(): void }) {
    this.#stop = stop;
    this.signal = AbortSignal.any([stop, this.#cut.signal]);
    const left = Math.max(0, deadline - Date.now());
    this.#timers = [setTimeout(() => this.cut(new LimitReached(TIME_LIMIT_ERROR)), left), setTimeout(() => o.overdue(), left + o.graceMs)];
  }

  /** Ends the run's work for a reason of the service's (the first reason wins). */
  cut(reason: Error): void {
    if (!this.#cut.signal.aborted) this.#cut.abort(reason);
  }

  get cutShort(): Error | undefined {
    return this.#stop.aborted || !this.#cut.signal.aborted ? undefined : (this.#cut.signal.reason as Error);
  }

  dispose(): void {
    for (const t of this.#timers) clearTimeout(t);
  }
}

/**
 * Resolves when `work` settles, or `graceMs` after `signal` aborted if it has not by then: then
 * `onStuck` is called and the work is left to end on its own (`onLateEnd` when it does).
 */
export function settleWithin(work: Promise<unknown>, signal: AbortSignal, graceMs: number, onStuck: () => void, onLateEnd?: () => void): Promise<void> {
  let stuck = false;
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  if (onLateEnd) void settled.then(() => stuck && onLateEnd());
  return new Promise<void>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      timer = setTimeout(() => {
        stuck = true;
        onStuck();
        resolve();
      }, graceMs);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    void settled.then(() => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
