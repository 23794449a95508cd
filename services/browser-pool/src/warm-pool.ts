/**
 * Launched, prepared, never-used browsers kept ready so a request gets one in milliseconds.
 * Refilled in the background one launch at a time (a launch is CPU-heavy; two at once would
 * slow the browsers in use); a warm browser that dies is dropped and replaced.
 */
import { withRequestId, type Logger } from '../../common/src/logger.js';
import type { LiveBrowser } from './live-browser.js';

/** The set of warm browsers and its background refill. */
export class WarmPool {
  readonly #size: number;
  readonly #launch: (signal: AbortSignal) => Promise<LiveBrowser>;
  readonly #abort = new AbortController();
  readonly #logger: Logger;
  readonly #idle: LiveBrowser[] = [];
  #filling: Promise<void> | undefined;
  #stopped = false;
  #backoffMs = 0;
  #waiters: (() => void)[] = [];

  constructor(o: { size: number; launch: (signal: AbortSignal) => Promise<LiveBrowser>; logger: Logger }) {
    this.#size = o.size;
    this.#launch = o.launch;
    this.#logger = o.logger;
  }

  get size(): number {
    return this.#size;
  }

  get idleCount(): number {
    return this.#idle.length;
  }

  /** Starts filling in the background. */
  start(): void {
    this.#fill();
  }

  /** A warm browser, or undefined when none is ready. Call `refill` once it is really used (or `giveBack`). */
  take(): LiveBrowser | undefined {
    let b: LiveBrowser | undefined;
    while ((b = this.#idle.shift()) && !b.alive) void b.shutdown().catch(() => {});
    return b;
  }

  /** Launches replacements in the background until the pool is full again. */
  refill(): void {
    this.#fill();
  }

  /** Puts back a browser taken but not used (its request was refused). */
  giveBack(b: LiveBrowser): void {
    if (this.#stopped || !b.alive || this.#idle.length >= this.#size) void b.shutdown().catch(() => {});
    else this.#idle.unshift(b);
  }

  /** Resolves once the pool holds its full size (or is stopped). */
  whenFull(): Promise<void> {
    if (this.#stopped || this.#idle.length >= this.#size) return Promise.resolve();
    return new Promise((r) => this.#waiters.push(r));
  }

  #fill(): void {
    if (this.#stopped || this.#filling || this.#idle.length >= this.#size) return;
    // Outside the request that triggered the refill: a warm browser serves a later request, and
    // its lines must not carry the id of the one that happened to take its predecessor.
    this.#filling = withRequestId(undefined, async () => {
      while (!this.#stopped && this.#idle.length < this.#size) {
        if (this.#backoffMs) await new Promise((r) => setTimeout(r, this.#backoffMs).unref());
        if (this.#stopped) break;
        try {
          const b = await this.#launch(this.#abort.signal);
          this.#backoffMs = 0;
          if (this.#stopped || this.#idle.length >= this.#size) {
            await b.shutdown();
            await b.chromium.removed;
            break;
          }
          void b.chromium.exited.then(() => this.#dropDead(b));
          this.#idle.push(b);
        } catch (err) {
          if (this.#stopped) break;
          this.#backoffMs = Math.min(Math.max(this.#backoffMs * 2, 500), 30000);
          this.#logger.error({ err, retryInMs: this.#backoffMs }, 'warm browser launch failed');
        }
      }
    }).finally(() => {
      this.#filling = undefined;
      if (this.#stopped || this.#idle.length >= this.#size) for (const w of this.#waiters.splice(0)) w();
    });
  }

  #dropDead(b: LiveBrowser): void {
    const i = this.#idle.indexOf(b);
    if (i === -1) return;
    this.#idle.splice(i, 1);
    this.#logger.warn({ browserId: b.id }, 'warm browser exited; replacing it');
    void b.shutdown().catch(() => {});
    this.#fill();
  }

  /** Stops refilling and kills every warm browser. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    for (const w of this.#waiters.splice(0)) w();
    const filling = this.#filling;
    const gone = (b: LiveBrowser) => b.shutdown().then(() => b.chromium.removed);
    await Promise.all(this.#idle.splice(0).map(gone));
    await filling;
    await Promise.all(this.#idle.splice(0).map(gone));
  }
}
