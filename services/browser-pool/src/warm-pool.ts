/**
 * Launched, prepared, never-used browsers kept ready so a request gets one in milliseconds. How
 * many follows demand: the target is the number of launches needed to cover the creates arriving
 * while one launch runs (recent arrival rate × recent launch time, Little's law), kept between a
 * floor and a ceiling, and it falls back to the floor when creates stop (surplus browsers are shut
 * down). Refills run ahead of demand but at most `maxParallelLaunches` at once (a launch is
 * CPU-heavy; more would slow the browsers in use), and each waits for a node slot (node-slots.ts).
 * A warm browser that dies is dropped and replaced.
 */
import { withRequestId, type Logger } from '../../common/src/logger.js';
import type { LiveBrowser } from './live-browser.js';

/** How the warm pool sizes itself (see the README's POOL_WARM_* settings). */
export interface WarmPoolSettings {
  /** Warm browsers kept even without demand. */
  floor: number;
  /** Most warm browsers kept, however high the demand. */
  ceiling: number;
  /** Time constant of the demand average: an arrival counts half after ~0.7 of it. */
  windowMs: number;
  /** Launches of warm browsers running at once. */
  maxParallelLaunches: number;
}

/** What a launch reports of itself. */
export interface LaunchTiming {
  /** Milliseconds the browser's start took, once it had its slot and its turn. */
  startMs?: number;
}

/** The launch time assumed until one has been measured. */
const FIRST_LAUNCH_MS = 1000;
/** Weight of the newest launch time in its average. */
const LAUNCH_WEIGHT = 0.3;

/**
 * The recent arrival rate of creates (per second): an exponentially weighted average, so a burst
 * raises it at once and it decays with time constant `windowMs` once creates stop.
 */
export class DemandRate {
  readonly #windowMs: number;
  #rate = 0;
  #at = 0;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** One create arrived at `now` (ms). */
  arrive(now: number): void {
    this.#rate = this.perSecond(now) + 1000 / this.#windowMs;
    this.#at = now;
  }

  /** The rate at `now`, decayed since the last arrival. */
  perSecond(now: number): number {
    return this.#rate * Math.exp(-Math.max(0, now - this.#at) / this.#windowMs);
  }
}

/** Warm browsers wanted for `ratePerSecond` creates when a launch takes `launchMs`, within floor and ceiling. */
export function warmTarget(ratePerSecond: number, launchMs: number, s: Pick<WarmPoolSettings, 'floor' | 'ceiling'>): number {
  const wanted = Math.ceil(ratePerSecond * (launchMs / 1000) - 0.05); // a trace of demand long gone is none
  return Math.min(Math.max(s.floor, s.ceiling), Math.max(s.floor, wanted));
}

/** The set of warm browsers and its background refill. */
export class WarmPool {
  readonly #s: WarmPoolSettings;
  /** Launches a browser; sets `timing.startMs` to how long its start took, without waiting for a node slot or a start turn. */
  readonly #launch: (signal: AbortSignal, timing: LaunchTiming) => Promise<LiveBrowser>;
  readonly #abort = new AbortController();
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #demand: DemandRate;
  readonly #idle: LiveBrowser[] = [];
  #launching = 0;
  #launchMs = FIRST_LAUNCH_MS;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #backoffMs = 0;
  #backoffUntil = 0;
  #waiters: (() => void)[] = [];
  readonly #launches = new Set<Promise<void>>();

  constructor(o: { settings: WarmPoolSettings; launch: (signal: AbortSignal, timing: LaunchTiming) => Promise<LiveBrowser>; logger: Logger; now?: () => number }) {
    this.#s = o.settings;
    this.#launch = o.launch;
    this.#logger = o.logger;
    this.#now = o.now ?? Date.now;
    this.#demand = new DemandRate(o.settings.windowMs);
  }

  /** The number of warm browsers wanted now. */
  get target(): number {
    return warmTarget(this.#demand.perSecond(this.#now()), this.#launchMs, this.#s);
  }

  get idleCount(): number {
    return this.#idle.length;
  }

  /** Warm launches running now. */
  get launching(): number {
    return this.#launching;
  }

  /** Starts filling in the background, and re-sizing as demand changes. */
  start(): void {
    this.#fill();
    // Often enough that a surplus goes within a fraction of the window once demand stops.
    const every = Math.min(Math.max(this.#s.windowMs / 4, 250), 5000);
    this.#timer = setInterval(() => this.adjust(), every);
    this.#timer.unref();
  }

  /** A create that a warm browser could serve arrived (taken one or not): demand rises. */
  noteDemand(): void {
    this.#demand.arrive(this.#now());
  }

  /** A warm browser, or undefined when none is ready. Call `refill` once it is really used (or `giveBack`). */
  take(): LiveBrowser | undefined {
    let b: LiveBrowser | undefined;
    while ((b = this.#idle.shift()) && !b.alive) void b.shutdown().catch(() => {});
    return b;
  }

  /** Launches replacements in the background up to the target. */
  refill(): void {
    this.#fill();
  }

  /** Puts back a browser taken but not used (its request was refused). */
  giveBack(b: LiveBrowser): void {
    if (this.#stopped || !b.alive || this.#idle.length >= Math.max(this.target, 1)) void b.shutdown().catch(() => {});
    else this.#idle.unshift(b);
  }

  /** Shuts down one idle browser to free its node slot for a request; false when there is none. */
  yieldOne(): boolean {
    const b = this.#idle.pop();
    if (!b) return false;
    void b.shutdown().catch(() => {});
    return true;
  }

  /** Sheds the browsers above the target (demand fell) and launches those missing (it rose). */
  adjust(): void {
    if (this.#stopped) return;
    const surplus = this.#idle.length - this.target;
    // The oldest go first: the newest are the least likely to have gone stale.
    for (const b of surplus > 0 ? this.#idle.splice(0, surplus) : []) void b.shutdown().catch(() => {});
    this.#fill();
  }

  /** Resolves once the pool holds its target (or is stopped). */
  whenFull(): Promise<void> {
    if (this.#stopped || this.#idle.length >= this.target) return Promise.resolve();
    return new Promise((r) => this.#waiters.push(r));
  }

  #fill(): void {
    if (this.#stopped) return;
    if (this.#idle.length >= this.target) for (const w of this.#waiters.splice(0)) w();
    while (this.#launching < this.#s.maxParallelLaunches && this.#idle.length + this.#launching < this.target) this.#launchOne();
  }

  #launchOne(): void {
    this.#launching++;
    // Outside the request that triggered the refill: a warm browser serves a later request, and
    // its lines must not carry the id of the one that happened to take its predecessor.
    const launch: Promise<void> = withRequestId(undefined, async () => {
      const wait = this.#backoffUntil - this.#now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait).unref());
      if (this.#stopped) return;
      const started = this.#now();
      try {
        const timing: LaunchTiming = {};
        const b = await this.#launch(this.#abort.signal, timing);
        // The start alone: time spent waiting for a slot on a full node would raise the target, and launch more into the queue.
        this.#launchMs += LAUNCH_WEIGHT * ((timing.startMs ?? this.#now() - started) - this.#launchMs);
        this.#backoffMs = 0;
        if (this.#stopped || this.#idle.length >= this.target) {
          await b.shutdown();
          await b.chromium.removed;
          return;
        }
        void b.chromium.exited.then(() => this.#dropDead(b));
        this.#idle.push(b);
      } catch (err) {
        if (this.#stopped) return;
        this.#backoffMs = Math.min(Math.max(this.#backoffMs * 2, 500), 30000);
        this.#backoffUntil = this.#now() + this.#backoffMs;
        this.#logger.error({ err, retryInMs: this.#backoffMs }, 'warm browser launch failed');
      }
    }).finally(() => {
      this.#launching--;
      this.#launches.delete(launch);
      this.#fill();
    });
    this.#launches.add(launch);
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
    if (this.#timer) clearInterval(this.#timer);
    this.#abort.abort();
    for (const w of this.#waiters.splice(0)) w();
    const gone = (b: LiveBrowser) => b.shutdown().then(() => b.chromium.removed);
    await Promise.all(this.#idle.splice(0).map(gone));
    await Promise.all(this.#launches);
    await Promise.all(this.#idle.splice(0).map(gone));
  }
}
