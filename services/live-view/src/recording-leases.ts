/**
 * This process's hold on recordings, so that any number of live-view replicas record every
 * browser once and a dead replica's recordings are carried on by another. Every `renewMs` the
 * process says it is alive (its instance row), renews the lease of each recording it holds
 * (learning which it lost, e.g. after a pause longer than the lease), and takes over recordings
 * whose lease ran out: their holder died, or let go when it stopped.
 *
 * The instance id must be unique among the live processes (a pod name). At start a process
 * refuses an id that another live process uses: one that still runs on this host (the instance
 * row names its process), or, on another host, one whose heartbeat moves on while we watch. A
 * process of the same id that is gone (a restart) is succeeded: its leases are ours.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../common/src/logger.js';
import { processIdentity, processLiveness } from '../../common/src/process-start.js';
import type { Holder, RecordingRepository, RecordingRow } from './recording.repository.js';

/** Another live process uses this instance id. */
export class DuplicateInstanceError extends Error {
  constructor(instanceId: string) {
    super(
      `LIVE_VIEW_INSTANCE_ID=${instanceId} is in use by another live-view process that is still running; ` +
        'give every replica its own id (e.g. the pod name) and start again',
    );
    this.name = this.constructor.name;
  }
}

export interface LeaseListener {
  /** Recordings this process is writing (asked before each renewal). */
  writing(): string[];
  /** Of those, the ones another replica took over: stop writing them. */
  lost(browserIds: string[]): void;
  /** A recording whose holder died (or let go) is this process's now. */
  taken(row: RecordingRow): void;
}

export interface RecordingLeasesOptions {
  repo: RecordingRepository;
  instanceId: string;
  leaseMs: number;
  renewMs: number;
  logger: Logger;
  /** The process's nonce; random unless a test fixes it. */
  nonce?: string;
  /** The OS process this is (processIdentity(), the default), for a restart on the same host to see at once that it is gone; null: unsaid (a test playing several processes in one). */
  process?: string | null;
  /** Recordings taken over per round (the rest are left for the next, or for other replicas). */
  takeOverBatch?: number;
}

export class RecordingLeases {
  readonly holder: Holder;
  readonly leaseMs: number;
  readonly #o: RecordingLeasesOptions;
  readonly #process: string | undefined;
  #listener: LeaseListener | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  /** performance.now() of the last renewal that reached the database. */
  #renewedAt = performance.now();
  #takingOver = true;
  #stopping: Promise<void> | undefined;
  #warnedId = false;

  constructor(o: RecordingLeasesOptions) {
    if (o.renewMs * 2 > o.leaseMs) throw new RangeError('a lease must last at least two renewals');
    this.#o = o;
    this.leaseMs = o.leaseMs;
    this.holder = { instanceId: o.instanceId, nonce: o.nonce ?? randomBytes(8).toString('hex') };
    this.#process = o.process === null ? undefined : (o.process ?? processIdentity());
  }

  /**
   * Makes this process the live one of its instance id (refusing a live duplicate) and takes over
   * what earlier processes of the id held. Resolves to how many recordings that was.
   */
  async start(): Promise<number> {
    const { repo, instanceId, leaseMs, renewMs, logger } = this.#o;
    const seen = await repo.instance(instanceId);
    const recent = seen && seen.nonce !== this.holder.nonce && !seen.stopped && seen.heartbeatAtMs > repo.now() - leaseMs;
    const liveness = recent ? processLiveness(seen.process) : 'gone';
    // It ran on this host (a crash and restart, or a second process started by mistake): its pid says at once.
    if (liveness === 'alive') throw new DuplicateInstanceError(instanceId);
    if (recent && liveness === 'gone') logger.info({ instanceId }, 'the process of this instance id that was alive a moment ago ran on this host and is gone; succeeding it at once');
    if (recent && liveness === 'unknown') {
      // Alive, or died a moment ago, on another host: a live process beats again within a renewal, or a few when
      // its host is busy, so watch for three renewals (never past its lease) before succeeding it.
      logger.info({ instanceId }, 'another process of this instance id was alive a moment ago; making sure it is gone');
      const until = performance.now() + Math.min(renewMs * 3, seen.heartbeatAtMs + leaseMs - repo.now());
      for (;;) {
        await new Promise((r) => setTimeout(r, Math.min(renewMs / 2, Math.max(0, until - performance.now()))));
        const now = await repo.instance(instanceId);
        if (now && !now.stopped && (now.nonce !== seen.nonce || now.heartbeatAtMs !== seen.heartbeatAtMs)) throw new DuplicateInstanceError(instanceId);
        if (performance.now() >= until) break;
      }
    }
    await repo.registerInstance(this.holder, this.#process);
    this.#renewedAt = performance.now();
    const taken = await repo.takeOverPredecessors(this.holder, leaseMs);
    if (taken) logger.info({ instanceId, recordings: taken }, 'recordings of an earlier process of this instance taken over');
    return taken;
  }

  /** Starts renewing and taking over, telling `listener`. */
  listen(listener: LeaseListener): void {
    this.#listener = listener;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopping) return;
    this.#timer = setTimeout(() => {
      this.#round = this.#renewAndTakeOver().finally(() => this.#schedule());
    }, this.#o.renewMs);
    this.#timer.unref();
  }

  async #renewAndTakeOver(): Promise<void> {
    const { repo, leaseMs, logger } = this.#o;
    const listener = this.#listener!;
    const writing = listener.writing();
    try {
      if (!(await repo.heartbeat(this.holder)) && !this.#warnedId) {
        this.#warnedId = true;
        logger.error({ instanceId: this.holder.instanceId }, 'another process registered this LIVE_VIEW_INSTANCE_ID after this one; ids must be unique');
      }
      const held = await repo.renewLeases(this.holder, leaseMs);
      this.#renewedAt = performance.now();
      const lost = writing.filter((id) => !held.has(id));
      if (lost.length) listener.lost(lost);
    } catch (err) {
      logger.warn({ err: err instanceof Error ? err.message : err }, 'leases not renewed');
      // Past the lease another replica may have them: stop writing until they are taken back.
      if (performance.now() - this.#renewedAt > leaseMs && writing.length) listener.lost(writing);
      return;
    }
    if (!this.#takingOver || this.#stopping) return;
    try {
      for (const row of await repo.expired(this.#o.takeOverBatch ?? 20)) {
        if (!this.#takingOver) break;
        const taken = await repo.takeOver(row.browserId, this.holder, leaseMs);
        if (taken) {
          logger.info({ browserId: taken.browserId, from: row.instanceId, state: taken.state }, 'recording taken over');
          listener.taken(taken);
        }
      }
    } catch (err) {
      logger.warn({ err: err instanceof Error ? err.message : err }, 'expired leases not taken over; trying again');
    }
  }

  /** Takes over nothing more (this process is stopping); keeps renewing what it holds. */
  stopTakingOver(): void {
    this.#takingOver = false;
  }

  /** Stops renewing and lets go of every lease, so that another replica takes over at once. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#takingOver = false;
      clearTimeout(this.#timer);
      await this.#round;
      const released = await this.#o.repo.release(this.holder);
      await this.#o.repo.retireInstance(this.holder);
      if (released) this.#o.logger.info({ recordings: released }, 'leases released for another replica to take over');
    })();
    return this.#stopping;
  }
}
