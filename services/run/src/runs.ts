/**
 * The run domain: creating runs (and their sessions and disks), reading and listing them, their
 * steps and events, and stopping them. Execution lives in run-worker.ts and scheduling in
 * scheduler.ts.
 */
import { StopReason } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { agentEnum, type AgentName } from '../../common/src/agent-name.js';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../../common/src/errors.js';
import type { NatsConnection } from '../../common/src/bus.js';
import { newId } from '../../common/src/ids.js';
import { currentRequestId, type Logger } from '../../common/src/logger.js';
import { browserLifecycle, publish, runStops, runWakeups, subscribe } from '../../common/src/subjects.js';
import type { ModelRegistry, OfferedModel } from './agents/models.js';
import type { RunClients } from './clients.js';
import { TERMINAL_EVENTS, type RunEvents } from './run-events.js';
import { TERMINAL, type BrowserOptions, type RunRepository, type RunRow, type RunStatus, type SessionRow } from './run.repository.js';

/** Why a session closed when its idle browser gave its slot to a newer one. */
export const SESSION_RECLAIMED_REASON = 'browser reclaimed for a newer run';

export interface CreateRunInput {
  projectId: string;
  agent: AgentName;
  task: string;
  model?: string | undefined;
  browser?: BrowserOptions | undefined;
  sessionId?: string | undefined;
  attachedFileIds: string[];
  workspaceId?: string | undefined;
}

export interface RunsDeps {
  repo: RunRepository;
  events: RunEvents;
  clients: RunClients;
  models: ModelRegistry;
  nc: NatsConnection;
  logger: Logger;
}

export class Runs {
  readonly #d: RunsDeps;

  constructor(deps: RunsDeps) {
    this.#d = deps;
  }

  /** The models a run may name, and the default. */
  models(): { models: OfferedModel[]; defaultModel: string; otherNames: string } {
    return { ...this.#d.models.offered(), defaultModel: this.#d.models.defaultModel };
  }

  async create(input: CreateRunInput): Promise<RunRow> {
    const { repo, clients } = this.#d;
    if (input.workspaceId && input.agent !== 'browsercode') throw new InvalidArgumentError('workspace_id is only supported by the browsercode agent');
    if (!input.task.trim()) throw new InvalidArgumentError('task must not be empty');
    const model = input.model || this.#d.models.defaultModel;
    this.#d.models.check(model);
    const runId = newId('run');

    // The disk the run works on: its workspace's (browsercode, when given or kept by the
    // session), else its session's own.
    let session: SessionRow | undefined;
    let sessionId = input.sessionId;
    let workspaceId: string | null = input.workspaceId || null;
    let diskId: string;
    if (sessionId) {
      session = await this.#followable(input.projectId, input.agent, sessionId);
      workspaceId ??= session.workspaceId;
      diskId = workspaceId && workspaceId !== session.workspaceId ? await this.#workspaceDisk(input.projectId, workspaceId) : session.diskId!;
    } else {
      sessionId = newId('ses');
      if (workspaceId) diskId = await this.#workspaceDisk(input.projectId, workspaceId);
      else diskId = (await clients.fileStorage.api.createDisk({ projectId: input.projectId, agent: agentEnum(input.agent), sessionId })).disk!.id;
    }

    let missing: string[] = [];
    if (input.attachedFileIds.length) {
      const r = await clients.fileStorage.api.attachFiles({ projectId: input.projectId, agent: agentEnum(input.agent), diskId, runId, fileIds: input.attachedFileIds });
      missing = r.missingFileIds;
    }

    await repo.knex.transaction(async (trx) => {
      if (session) {
        const again = await repo.session(input.projectId, input.agent, sessionId!, trx);
        if (!again || again.status === 'closed') throw new ConflictError('Session is closed');
        if (again.busy && input.agent === 'browser-agent') throw new ConflictError('Session is busy');
      } else {
        await repo.insertSession({ id: sessionId!, projectId: input.projectId, agent: input.agent, diskId, workspaceId }, trx);
      }
      await repo.insertRun({ id: runId, projectId: input.projectId, agent: input.agent, sessionId: sessionId!, task: input.task, model, browser: input.browser ?? {}, missingFileIds: missing, workspaceId, diskId, requestId: currentRequestId() ?? null }, trx);
      await repo.setLatestRun(sessionId!, runId, trx);
    });
    await this.#d.events.append(runId, 'run.queued', { sessionId, model, missingFileIds: missing });
    publish(this.#d.nc, runWakeups, {}, { handedOver: false });
    return (await repo.run(runId))!;
  }

  /** The disk of a workspace of this project (404 when there is none). */
  async #workspaceDisk(projectId: string, workspaceId: string): Promise<string> {
    const { disk } = await this.#d.clients.fileStorage.api.createDisk({ projectId, agent: agentEnum('browsercode'), workspaceId });
    return disk!.id;
  }

  /** The session a follow-up continues; browser-agent sessions must be open and idle (a busy browsercode session queues the run). */
  async #followable(projectId: string, agent: AgentName, sessionId: string): Promise<SessionRow> {
    const s = await this.#d.repo.session(projectId, agent, sessionId);
    if (!s) throw new NotFoundError('Session not found');
    if (s.status === 'closed') throw new ConflictError('Session is closed');
    if (s.busy && agent === 'browser-agent') throw new ConflictError('Session is busy');
    return s;
  }

  async get(projectId: string, agent: AgentName | null, runId: string): Promise<RunRow> {
    const r = await this.#d.repo.run(runId);
    if (!r || r.projectId !== projectId || (agent && r.agent !== agent)) throw new NotFoundError('Run not found');
    return r;
  }

  /**
   * Stops a queued or running run. browser-agent: the browser is stopped and the session closes
   * (they share a lifetime). The worker, wherever it runs, is told over NATS and aborts.
   */
  async stop(projectId: string, agent: AgentName | null, runId: string): Promise<RunRow> {
    const run = await this.get(projectId, agent, runId);
    if (TERMINAL.includes(run.status)) throw new ConflictError(`Run already ${run.status}`);
    const stopped = await this.#d.repo.finish(runId, ['queued', 'running'], 'stopped', {}, { keepLease: true });
    if (!stopped) {
      const now = await this.get(projectId, agent, runId);
      throw new ConflictError(`Run already ${now.status}`);
    }
    await this.#d.events.append(runId, 'run.stopped', { wasRunning: run.status === 'running' });
    publish(this.#d.nc, runStops, { runId }, { runId });
    if (run.agent === 'browser-agent') await this.closeSession(run, 'run stopped');
    publish(this.#d.nc, runWakeups, {}, { handedOver: false });
    return (await this.#d.repo.run(runId))!;
  }

  /** Closes a browser-agent session (an already closed one keeps its reason) and stops its browser. */
  async closeSession(run: RunRow, reason: string): Promise<void> {
    const session = await this.#d.repo.session(run.projectId, run.agent, run.sessionId);
    await this.#d.repo.closeSession(run.sessionId, reason);
    const browserId = session?.browserId ?? run.browserId;
    if (browserId) await stopBrowserOfStoppedRun(this.#d, run, browserId);
  }

  /**
   * Closes browser-agent sessions whose browser stopped (reaped, timed out, reclaimed or stopped
   * directly): a session shares its browser's lifetime. `stopped` hears of each stop too (its
   * project has a free browser slot). Returns the subscription.
   */
  closeSessionsOnBrowserStop(stopped?: (projectId: string) => void): { unsubscribe(): void } {
    return subscribe(
      this.#d.nc,
      browserLifecycle,
      ({ key: { browserId }, payload: event }) => {
        if (stopped && event.projectId) stopped(event.projectId);
        this.#d.repo.closeSessionsOfBrowser(browserId, event.reason === 'reclaimed' ? SESSION_RECLAIMED_REASON : 'browser stopped').then(
          (ids) => ids.length && this.#d.logger.info({ browserId, sessions: ids }, 'sessions closed with their browser'),
          (err: Error) => this.#d.logger.warn({ browserId, err: err.message }, 'closing sessions of a stopped browser failed'),
        );
      },
      { logger: this.#d.logger, filter: { kind: 'stopped' } },
    );
  }

  async list(projectId: string, agent: AgentName, filter: { sessionId?: string; status?: RunStatus }, limit: number, cursor: string) {
    return this.#d.repo.runs(projectId, agent, filter, limit || 50, cursor || undefined);
  }

  async steps(projectId: string, agent: AgentName | null, runId: string, after: number, limit: number) {
    const run = await this.get(projectId, agent, runId);
    const page = await this.#d.repo.steps(runId, after, limit || 50);
    const urls = await Promise.all(
      page.steps.map((s) =>
        s.screenshotKey
          ? this.#d.clients.fileStorage.api.signObjectUrl({ projectId: run.projectId, key: s.screenshotKey, ttlSeconds: 0, downloadFilename: '' }).then(
              (r) => r.url,
              () => null,
            )
          : Promise.resolve(null),
      ),
    );
    return { steps: page.steps.map((s, i) => ({ ...s, screenshotUrl: urls[i] })), hasMore: page.hasMore, nextAfter: page.steps.length ? page.steps[page.steps.length - 1]!.number : after };
  }

  async events(projectId: string, agent: AgentName | null, runId: string, after: number, limit: number) {
    await this.get(projectId, agent, runId);
    const page = await this.#d.repo.events(runId, after, limit || 50);
    return { ...page, nextAfter: page.events.length ? page.events[page.events.length - 1]!.id : after };
  }

  async watch(projectId: string, agent: AgentName | null, runId: string, after: number, signal: AbortSignal) {
    await this.get(projectId, agent, runId);
    // A client that has seen the terminal event already (a reconnect after the end) gets an empty stream, not one that never ends.
    const last = await this.#d.repo.lastEvent(runId);
    if (last && TERMINAL_EVENTS.has(last.type) && last.id <= after) return (async function* () {})();
    return this.#d.events.watch(runId, after, signal);
  }

  async session(projectId: string, agent: AgentName, sessionId: string): Promise<SessionRow> {
    const s = await this.#d.repo.session(projectId, agent, sessionId);
    if (!s) throw new NotFoundError('Session not found');
    return s;
  }

  async sessions(projectId: string, agent: AgentName, status: 'open' | 'closed' | null, limit: number, cursor: string) {
    return this.#d.repo.sessions(projectId, agent, status, limit || 50, cursor || undefined);
  }
}

/** Stops the browser of a stopped run (errors are logged; the pool reaps it anyway). */
export async function stopBrowserOfStoppedRun(d: { clients: RunClients; logger: Logger }, run: RunRow, browserId: string): Promise<void> {
  await d.clients.browserPool.api
    .stopBrowser({ projectId: run.projectId, browserId, reason: StopReason.STOP_REASON_RUN_STOPPED }, { deadlineMs: 30000 })
    .then(() => d.logger.info({ runId: run.id, browserId }, 'browser of a stopped run stopped'))
    .catch((err: Error) => d.logger.warn({ runId: run.id, browserId, err: err.message }, 'could not stop the browser of a stopped run'));
}
