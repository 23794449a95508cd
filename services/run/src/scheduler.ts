/**
 * Claims queued runs and runs them, up to `concurrency` at once in this process. Wake-ups come
 * over NATS; a slow poll is the fallback. Each claimed run holds a lease that this process renews;
 * a run whose lease expires (its process died) is taken over by whichever scheduler notices first
 * and continues here from its last completed step (see RunWorker); after `maxTakeovers` takeovers
 * it fails instead, and its browser is released. A stop request (NATS) aborts the run here at once.
 */
import { randomBytes } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { withRequestId, type Logger } from '../../common/src/logger.js';
import { processIdentity, processLiveness } from '../../common/src/process-start.js';
import { publish, runStops, runWakeups, subscribe } from '../../common/src/subjects.js';
import type { RunClients } from './clients.js';
import type { RunEvents } from './run-events.js';
import type { RunRepository, RunRow } from './run.repository.js';
import { settleWithin } from './run-bounds.js';

/** How often a worker looks for workers on its host that died holding runs (one query; their leases are ended at once). */
const GONE_CHECK_MS = 2000;

export const LEASE_EXPIRED_REASON = 'the worker running it stopped responding (its lease expired)';
export const takeoverLimitError = (max: number) =>
  max === 0
    ? 'The run was interrupted: the worker running it stopped responding (its lease expired), and runs are not taken over by another worker here (RUN_MAX_TAKEOVERS=0).'
    : `The run was interrupted: the worker running it stopped responding (its lease expired), and it had already been taken over by another worker ${max} time${max === 1 ? '' : 's'}, the most a run may be (RUN_MAX_TAKEOVERS), so it was not resumed again.`;

/** How a run taken over from a dead worker is handed to `execute`. */
export interface Takeover {
  reason: string;
  /** How many times the run has been taken over, this one included. */
  count: number;
}
export const SHUTDOWN_ERROR = 'The run was interrupted: the run service shut down while it was running, and runs are not taken over by another worker here (RUN_MAX_TAKEOVERS=0).';
export const HANDOVER_REASON = 'the worker running it shut down (a restart or rolling update) and handed it over';

/** The abort reason of a run's work when its worker shuts down and hands it over: the work leaves the run as it is (running, its browser kept). */
export class HandedOver extends Error {
  constructor() {
    super('the run service is shutting down; the run is handed over to another worker');
    this.name = this.constructor.name;
  }
}

export interface SchedulerOptions {
  repo: RunRepository;
  events: RunEvents;
  clients: RunClients;
  nc: NatsConnection;
  logger: Logger;
  execute(run: RunRow, signal: AbortSignal, takeover?: Takeover): Promise<void>;
  concurrency: number;
  leaseMs: number;
  /** Takeovers of one run after its worker died; beyond, it fails. 0 = never taken over. */
  maxTakeovers: number;
  maxRunningPerProject: number;
  /** Names this process in its leases (RUN_INSTANCE_ID). */
  instanceId?: string;
  pollMs: number;
  /** After a run is aborted, how long its work may take to wind down before its slot is freed anyway. */
  stopGraceMs: number;
}

export class RunScheduler {
  /** The lease owner: the process's instance id and a random part (a restart of the same pod is another owner). */
  readonly owner: string;
  /** This OS process (processIdentity()), written with each lease it takes. */
  readonly #process = processIdentity();
  readonly #o: SchedulerOptions;
  readonly #active = new Map<string, AbortController>();
  readonly #timers: NodeJS.Timeout[] = [];
  #subs: Subscription[] = [];
  #claiming = false;
  #again = false;
  #stopped = false;
  #idle: Promise<void> = Promise.resolve();
  #markIdle: () => void = () => {};

  constructor(options: SchedulerOptions) {
    this.#o = options;
    this.owner = `${options.instanceId ?? 'worker'}.${randomBytes(6).toString('hex')}`;
  }

  get activeRunIds(): string[] {
    return [...this.#active.keys()];
  }

  start(): void {
    const { nc, leaseMs, pollMs, logger } = this.#o;
    const wake = subscribe(
      nc,
      runWakeups,
      ({ payload }) => {
        // Runs a stopping replica let go are taken over now, not at the next look for expired leases.
        if (payload.handedOver) void this.reapExpired();
        this.poke();
      },
      { logger },
    );
    const stops = subscribe(nc, runStops, ({ key }) => this.#active.get(key.runId)?.abort(), { logger });
    this.#subs = [wake, stops];
    this.#timers.push(setInterval(() => this.poke(), pollMs));
    this.#timers.push(setInterval(() => void this.#renew(), Math.max(200, Math.floor(leaseMs / 3))));
    this.#timers.push(setInterval(() => void this.reapExpired(), Math.max(200, Math.floor(leaseMs / 2))));
    // A worker that died on this host is seen by its pid long before its leases run out.
    this.#timers.push(setInterval(() => void this.#reapGone(), Math.max(200, Math.min(GONE_CHECK_MS, Math.floor(leaseMs / 2)))));
    void this.reapExpired();
    this.poke();
  }

  /** Ends the leases of workers that ran on this host and whose process is gone (a crash), for reapExpired to take their runs over. */
  async #expireGone(): Promise<number> {
    let expired = 0;
    for (const o of await this.#o.repo.otherLeaseOwners(this.owner)) {
      if (processLiveness(o.process) !== 'gone') continue;
      const n = await this.#o.repo.expireLeasesOf(o.owner);
      if (n) this.#o.logger.info({ owner: o.owner, runs: n }, 'the worker holding these runs ran on this host and is gone; their leases end now');
      expired += n;
    }
    return expired;
  }

  async #reapGone(): Promise<void> {
    if (this.#stopped) return;
    try {
      if (await this.#expireGone()) await this.reapExpired(false);
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'looking for gone workers failed');
    }
  }

  /** Claims runs until the slots are full or nothing can start. */
  poke(): void {
    if (this.#stopped) return;
    if (this.#claiming) {
      this.#again = true;
      return;
    }
    this.#claiming = true;
    // Outside the request that woke it: the claim serves every queued run, each of which runs in its own.
    void withRequestId(undefined, async () => {
      try {
        do {
          this.#again = false;
          while (!this.#stopped && this.#active.size < this.#o.concurrency) {
            const run = await this.#o.repo.claim(this.owner, this.#o.leaseMs, this.#o.maxRunningPerProject, this.#process);
            if (!run) break;
            this.#launch(run);
          }
        } while (this.#again && !this.#stopped);
      } catch (err) {
        this.#o.logger.error({ err }, 'claiming runs failed');
      } finally {
        this.#claiming = false;
      }
    });
  }

  /** Runs `run` here; its work (and every log line of it) belongs to the request that created it. */
  #launch(run: RunRow, takeover?: Takeover): void {
    withRequestId(run.requestId, () => this.#work(run, takeover));
  }

  #work(run: RunRow, takeover?: Takeover): void {
    const ctl = new AbortController();
    if (this.#active.size === 0) this.#idle = new Promise((r) => (this.#markIdle = r));
    this.#active.set(run.id, ctl);
    this.#o.logger.info({ runId: run.id, projectId: run.projectId, ...(takeover ? { takeover: takeover.count } : {}) }, takeover ? 'run taken over' : 'run claimed');
    // A stop published before this run was registered here would be missed: look once now.
    void this.#o.repo.run(run.id).then(
      (now) => now?.status === 'stopped' && this.#active.get(run.id) === ctl && ctl.abort(),
      () => undefined,
    );
    const work = this.#o.execute(run, ctl.signal, takeover).catch((err) => this.#o.logger.error({ err, runId: run.id }, 'run execution threw'));
    // A stopped run frees its slot even when a step ignores the abort; the stuck work is logged.
    settleWithin(
      work,
      ctl.signal,
      this.#o.stopGraceMs,
      () => this.#o.logger.error({ runId: run.id, graceMs: this.#o.stopGraceMs }, 'stopped run is still busy after the grace; its slot is freed and the stuck work left to end'),
      () => this.#o.logger.warn({ runId: run.id }, 'stuck work of a stopped run ended'),
    )
      .then(() => this.#o.repo.releaseLease(run.id, this.owner))
      .catch((err: Error) => this.#o.logger.warn({ err: err.message, runId: run.id }, 'could not release the lease (it expires)'))
      .finally(() => {
        if (this.#active.get(run.id) === ctl) this.#active.delete(run.id);
        if (this.#active.size === 0) this.#markIdle();
        publish(this.#o.nc, runWakeups, {}, { handedOver: false }); // a slot (and maybe a project's quota) is free
      });
  }

  async #renew(): Promise<void> {
    try {
      // The controllers asked about: a run requeued meanwhile and claimed again has a new one, not to be aborted.
      const asked = new Map(this.#active);
      const lost = await this.#o.repo.renewLeases(this.owner, [...asked.keys()], this.#o.leaseMs);
      // Stopped (or failed by someone else): abort here too.
      for (const id of lost) if (this.#active.get(id) === asked.get(id)) asked.get(id)?.abort();
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'lease renewal failed');
    }
  }

  /**
   * Takes over the runs whose worker died (they continue here, beyond the slots if need be: they
   * were running already) and fails those taken over too often, releasing their browsers;
   * returns how many runs it handled. First ends the leases of workers on this host that are gone,
   * unless the caller just did (`lookForGone` false).
   */
  async reapExpired(lookForGone = true): Promise<number> {
    if (this.#stopped) return 0;
    try {
      if (lookForGone) await this.#expireGone();
      const error = takeoverLimitError(this.#o.maxTakeovers);
      const { taken, failed } = await this.#o.repo.takeOverExpired(this.owner, this.#o.leaseMs, this.#o.maxTakeovers, error, this.#process);
      for (const run of failed) await this.#afterInterrupted(run, error);
      for (const run of taken) {
        if (this.#stopped) break; // its lease runs out again and another replica takes it
        if (this.#active.has(run.id)) continue; // still running here (this process stalled past its lease): the lease is ours again
        this.#launch(run, { reason: run.handedOver ? HANDOVER_REASON : LEASE_EXPIRED_REASON, count: run.takeovers });
      }
      if (failed.length) this.poke();
      return taken.length + failed.length;
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'reaping expired leases failed');
      return 0;
    }
  }

  async #afterInterrupted(run: RunRow, error: string): Promise<void> {
    this.#o.logger.warn({ runId: run.id }, 'run failed: interrupted');
    await this.#o.events.append(run.id, 'run.failed', { error });
    if (run.browserId) {
      await this.#o.clients.browserPool.api.releaseBrowser({ projectId: run.projectId, browserId: run.browserId, runId: run.id }).catch(() => undefined);
    }
  }

  /**
   * Stops claiming. Runs still active are handed over: their work is aborted (a command is cut
   * short, as a crash would), what it stored stays, and their leases are let go at once so another
   * replica (or this service when it starts again) takes them over from their last step. With
   * takeovers off (RUN_MAX_TAKEOVERS=0) they are failed instead. Idempotent.
   */
  async stop(graceMs: number): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    for (const s of this.#subs) s.unsubscribe();
    const ids = this.activeRunIds;
    if (!ids.length) return;
    if (this.#o.maxTakeovers > 0) {
      for (const id of ids) this.#active.get(id)?.abort(new HandedOver());
      await Promise.race([this.#idle, new Promise((r) => setTimeout(r, graceMs))]);
      let handedOver = 0;
      for (const id of ids) {
        const handed = await this.#o.repo.handOver(id, this.owner).catch((err: Error) => this.#o.logger.warn({ err: err.message, runId: id }, 'could not hand the run over (its lease expires)'));
        if (handed) {
          handedOver++;
          this.#o.logger.info({ runId: id }, 'run handed over');
        }
      }
      if (handedOver) {
        try {
          publish(this.#o.nc, runWakeups, {}, { handedOver: true });
        } catch (err) {
          this.#o.logger.warn({ err }, 'handover not announced; the others find the runs at their next look for expired leases');
        }
      }
      return;
    }
    for (const id of ids) {
      if (await this.#o.repo.finish(id, ['running'], 'failed', { error: SHUTDOWN_ERROR })) {
        const run = await this.#o.repo.run(id);
        if (run) await this.#afterInterrupted(run, SHUTDOWN_ERROR);
      }
      this.#active.get(id)?.abort();
    }
    await Promise.race([this.#idle, new Promise((r) => setTimeout(r, graceMs))]);
  }
}
