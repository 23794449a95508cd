/**
 * A run's browser against its project's browser limit, and against a stop.
 *
 * The pool makes room on its own: a browser kept only for a session's follow-ups (no run in
 * progress) gives up its slot, longest idle first. Only when every browser of the project is in
 * real use does it answer RESOURCE_EXHAUSTED; then the run waits, never fails: a browser-agent run
 * goes back to `queued` (event `run.waiting`) and is claimed again when a slot may be free (a
 * browser of the project stopped, a run gave its browser back) or after a back-off; a browsercode
 * turn that needs a browser mid-way waits in place (event `browser.waiting`).
 *
 * A stop wins every race with provisioning: the run does not wait for a browser that is still
 * starting, and a browser that arrives for a run stopped meanwhile is stopped at once.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { BrowserStatus } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { agentEnum } from '../../common/src/agent-name.js';
import { RemoteError, Status } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { publish, runWakeups } from '../../common/src/subjects.js';
import { RunStopped } from './agents/run-errors.js';
import type { RunClients } from './clients.js';
import type { RunEvents } from './run-events.js';
import type { RunRepository, RunRow } from './run.repository.js';
import { stopBrowserOfStoppedRun } from './runs.js';

/** Every browser of the run's project is in real use (a run in progress, or handed out over CDP). */
export class BrowserLimitReached extends Error {
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.name = this.constructor.name;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export interface ProvisionedBrowser {
  id: string;
  liveViewUrl: string;
}

export interface BrowserCapacityDeps {
  repo: RunRepository;
  events: RunEvents;
  clients: RunClients;
  nc: NatsConnection;
  logger: Logger;
}

/** How long a browser create may take: the pool's launch queue and a Chromium start on a busy node. */
export const CREATE_DEADLINE_MS = 60000;
/** Longest a waiting run sleeps before it tries again without being woken. */
const MAX_WAIT_MS = 5000;
/** How long a follow-up waits for the session's previous run to give its browser back. */
const KEPT_HANDOVER_MS = 15000;

/** Resolves with `p`, or rejects with RunStopped as soon as `signal` aborts (`p` goes on). */
function unlessStopped<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => {}); // it goes on; its failure, unheard, would be an unhandled rejection (the process's end)
    return Promise.reject(new RunStopped());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new RunStopped());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export class BrowserCapacity {
  readonly #d: BrowserCapacityDeps;

  constructor(deps: BrowserCapacityDeps) {
    this.#d = deps;
  }

  /** Stops a browser a stopped run got (idempotent at the pool; errors are logged, the pool reaps anyway). */
  async stopForStoppedRun(run: RunRow, browserId: string): Promise<void> {
    await stopBrowserOfStoppedRun(this.#d, run, browserId);
  }

  /**
   * Creates the run's browser. Throws BrowserLimitReached when every browser of the project is in
   * real use, RunStopped as soon as the run is stopped (a browser still starting is stopped when it
   * arrives).
   */
  async create(run: RunRow, signal: AbortSignal): Promise<ProvisionedBrowser> {
    const call = this.#d.clients.browserPool.api.createBrowser(
      {
        projectId: run.projectId,
        profileId: run.browser.profileId,
        proxyCountryCode: run.browser.proxyCountryCode,
        screenWidth: run.browser.screenWidth,
        screenHeight: run.browser.screenHeight,
        stealth: run.browser.stealth,
        locale: run.browser.locale,
        timezone: run.browser.timezone,
        allowedDomains: run.browser.allowedDomains ?? [],
        // A run's browser blocks ads and trackers unless told not to (they cost the agent time and tokens).
        blockAds: run.browser.blockAds ?? true,
        sessionId: run.sessionId,
        runId: run.id,
        agent: agentEnum(run.agent),
      },
      { deadlineMs: CREATE_DEADLINE_MS },
    );
    let res;
    try {
      res = await unlessStopped(call, signal);
    } catch (err) {
      if (err instanceof RunStopped) {
        // The stop does not wait for the start-up; what it starts is stopped when it arrives.
        call.then((r) => r.browser && this.stopForStoppedRun(run, r.browser.id)).catch(() => undefined);
      } else if (err instanceof RemoteError && err.code === Status.RESOURCE_EXHAUSTED) {
        throw new BrowserLimitReached(err.publicMessage ?? 'Every browser of this project is in use', err.retryAfterSeconds ?? 5);
      }
      throw err;
    }
    const browser = res.browser!;
    return { id: browser.id, liveViewUrl: browser.liveViewUrl };
  }

  /**
   * Like `create`, but waits in place while the project is at its browser limit (a browsercode
   * turn that needs a browser mid-way), telling the run's events once; gives up at `deadline`.
   */
  async createWaiting(run: RunRow, signal: AbortSignal, deadline: number): Promise<ProvisionedBrowser> {
    let told = false;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.create(run, signal);
      } catch (err) {
        if (!(err instanceof BrowserLimitReached) || Date.now() >= deadline) throw err;
        if (!told) {
          told = true;
          await this.#d.events.append(run.id, 'browser.waiting', { reason: 'browser_limit', message: `Waiting for a browser slot: ${err.message}` });
        }
        await sleep(Math.min(250 * 2 ** attempt, MAX_WAIT_MS, Math.max(0, deadline - Date.now())), signal);
        if (signal.aborted) throw new RunStopped();
      }
    }
  }

  /**
   * Gives the session's kept browser to the run (so it is neither reclaimed nor idle-reaped while
   * the run uses it); undefined when it was stopped or reclaimed meanwhile.
   */
  async claimKept(run: RunRow, browserId: string, signal: AbortSignal): Promise<ProvisionedBrowser | undefined> {
    const api = this.#d.clients.browserPool.api;
    // The session's previous run may still be giving the browser back (it reads completed a moment before).
    const until = Date.now() + KEPT_HANDOVER_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        const { browser } = await api.claimBrowser({ projectId: run.projectId, browserId, runId: run.id });
        return { id: browser!.id, liveViewUrl: browser!.liveViewUrl };
      } catch (err) {
        if (!(err instanceof RemoteError && (err.code === Status.FAILED_PRECONDITION || err.code === Status.NOT_FOUND))) throw err;
        if (err.code === Status.NOT_FOUND || Date.now() >= until) return undefined;
        const { browser } = await api.getBrowser({ projectId: run.projectId, browserId });
        if (browser?.status !== BrowserStatus.BROWSER_STATUS_ACTIVE) return undefined; // stopped or reclaimed
        await sleep(Math.min(50 * 2 ** attempt, 1000), signal);
        if (signal.aborted) throw new RunStopped();
      }
    }
  }

  /**
   * Puts a claimed run back to `queued` until a browser slot may be free; the wait shows in its
   * events once (`run.waiting`). False when the run was stopped meanwhile.
   */
  async requeue(run: RunRow, limit: BrowserLimitReached): Promise<boolean> {
    const { repo, events, logger } = this.#d;
    const waitMs = Math.min(Math.max(limit.retryAfterSeconds * 1000, 250), MAX_WAIT_MS);
    if (!run.leaseOwner || !(await repo.requeue(run.id, run.leaseOwner, new Date(Date.now() + waitMs)))) return false;
    if ((await repo.lastEvent(run.id))?.type !== 'run.waiting') {
      await events.append(run.id, 'run.waiting', { reason: 'browser_limit', message: `Waiting for a browser slot: ${limit.message}` });
    }
    logger.info({ runId: run.id, projectId: run.projectId, waitMs }, 'run waits queued for a browser slot');
    return true;
  }

  /** A browser slot of the project may be free: its waiting runs may be claimed at once. */
  async slotMayBeFree(projectId: string): Promise<void> {
    try {
      if (await this.#d.repo.wakeWaiting(projectId)) publish(this.#d.nc, runWakeups, {}, { handedOver: false });
    } catch (err) {
      this.#d.logger.warn({ projectId, err: (err as Error).message }, 'could not wake runs waiting for a browser (they retry after their back-off)');
    }
  }
}
