/**
 * Executes one claimed run: the disk is materialised, the agent loop runs, the run ends
 * `completed` or `failed` (a stop was already recorded by StopRun).
 * browser-agent: the session's live browser is reused or a new one provisioned, and released
 * for the session at the end. browsercode: a browser is provisioned only when the model first
 * needs one and stopped at the end of the turn; what the run changes on the disk is stored as
 * its output files as it goes and once more at the end, whatever the ending.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { StopReason } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { AppError, RemoteError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { materializeDisk, syncDisk, type DiskManifest } from '../../file-storage/src/client/disk-sync.js';
import type { LoopCheckpoint, LoopResume, RecordedStep } from './agents/agent-loop.js';
import type { Action } from './agents/actions.js';
import type { StepMemory } from './agents/model.js';
import { runBrowserAgent } from './agents/browser-agent.js';
import { CannotResume, LimitReached, RunStopped } from './agents/run-errors.js';
import { runBrowsercode } from './agents/browsercode-agent.js';
import { ModelError, type Usage } from './agents/model.js';
import type { Terminal } from './agents/shell.js';
import type { ShellTenancy, Tenant } from './agents/shell-tenancy.js';
import type { ModelRegistry } from './agents/models.js';
import { ActionError } from './agents/page-tools.js';
import type { RunClients } from './clients.js';
import { poolDownloads } from './pool-downloads.js';
import type { RunEvents } from './run-events.js';
import type { RunRepository, RunRow } from './run.repository.js';
import { BrowserLimitReached, type BrowserCapacity, type ProvisionedBrowser } from './browser-capacity.js';
import { BrowserLost, RunGuard, TIME_LIMIT_ERROR } from './run-bounds.js';
import type { Runs } from './runs.js';
import { HandedOver, type Takeover } from './scheduler.js';

/** What the model is told of a command its dead worker was running. */
export const INTERRUPTED_COMMAND_ERROR = 'Interrupted: the worker running this run stopped while this ran, and the run was resumed on another worker. It may have partly run (or finished): check its effects before running it again.';

export interface RunLimits {
  maxSteps: number;
  /** Unusable model replies in a row before a browser-agent run ends (default 3). */
  maxModelFailures?: number;
  maxRunMs: number;
  actionTimeoutMs: number;
  /** How long a step may ignore an abort (time limit) before the run is failed anyway. */
  stopGraceMs: number;
  /** Output files one run stores at most (default 1,000); further new files are skipped with a `file.skipped` event. */
  maxOutputFiles?: number;
}

export interface RunWorkerDeps {
  repo: RunRepository;
  events: RunEvents;
  clients: RunClients;
  models: ModelRegistry;
  runs: Runs;
  /** The run's browser against the project's browser limit and a stop. */
  capacity: BrowserCapacity;
  logger: Logger;
  workDir: string;
  limits: RunLimits;
  /** How browsercode runs commands. */
  terminal: Terminal;
  /** Each run's uid, cgroups and work folder; undefined = a shared folder under workDir, no own uid. */
  tenancy?: ShellTenancy | undefined;
  /** Cost in USD of a model's tokens. */
  price(model: string, usage: { inputTokens: number; outputTokens: number }): number;
}

/** The message a failed run shows: what the user can act on, never internals. */
function failureMessage(err: unknown): string | undefined {
  if (err instanceof ModelError || err instanceof LimitReached || err instanceof ActionError || err instanceof BrowserLost || err instanceof CannotResume) return err.message;
  if (err instanceof RemoteError) return err.publicMessage ? `Browser or storage error: ${err.publicMessage}` : undefined;
  if (err instanceof AppError) return err.message;
  return undefined;
}

async function putObject(clients: RunClients, projectId: string, key: string, contentType: string, bytes: Buffer): Promise<void> {
  const { stream, response } = clients.fileStorage.api.putObject();
  response.catch(() => undefined);
  stream.write({ header: { projectId, key, contentType } });
  for (let i = 0; i < bytes.length; i += 512 * 1024) stream.write({ chunk: bytes.subarray(i, i + 512 * 1024) });
  stream.end();
  await response;
}

/** What a run holds while it executes, released at its end. */
interface Held {
  browserId?: string;
  liveViewUrl?: string;
  cdp?: Browser;
  /** Called when the connected browser goes away without the run letting it go. */
  lost?: () => void;
}

export class RunWorker {
  readonly #d: RunWorkerDeps;

  constructor(deps: RunWorkerDeps) {
    this.#d = deps;
  }

  /**
   * Provisions the session's browser or takes its kept one (browser-agent); browsercode gets a
   * fresh one each run, waiting in place while the project is at its browser limit. A
   * browser-agent run at the limit gets BrowserLimitReached (it waits queued, see execute).
   */
  async #browserFor(run: RunRow, signal: AbortSignal): Promise<ProvisionedBrowser> {
    const { repo, capacity } = this.#d;
    const session = run.agent === 'browser-agent' ? await repo.session(run.projectId, run.agent, run.sessionId) : undefined;
    if (session?.browserId) {
      const kept = await capacity.claimKept(run, session.browserId, signal);
      if (kept) return kept;
      await repo.closeSession(run.sessionId, 'browser stopped');
      throw new ModelError("The session's browser was stopped, so the session is closed; start a new conversation");
    }
    if (run.agent !== 'browser-agent') return capacity.createWaiting(run, signal, this.#deadline(run));
    const browser = await capacity.create(run, signal);
    await repo.attachBrowser(run.sessionId, browser.id);
    return browser;
  }

  /** The session keeps its browser for follow-ups: disconnects and releases it (releasing saves the profile). */
  async #releaseKept(run: RunRow, held: Held): Promise<boolean> {
    const { cdp, browserId } = held;
    held.cdp = undefined;
    await cdp?.disconnect().catch(() => undefined);
    if (!browserId) return false;
    await this.#d.clients.browserPool.api
      .releaseBrowser({ projectId: run.projectId, browserId, runId: run.id })
      .catch((err: Error) => this.#d.logger.warn({ runId: run.id, browserId, err: err.message }, 'could not release the browser'));
    // Idle now, so a run waiting for a slot may take it.
    await this.#d.capacity.slotMayBeFree(run.projectId);
    return true;
  }

  #deadline(run: RunRow): number {
    return Date.parse(run.startedAt ?? new Date().toISOString()) + this.#d.limits.maxRunMs;
  }

  /** Gets the run its browser (held from then on); a run stopped meanwhile ends here (RunStopped). */
  async #provision(run: RunRow, held: Held, signal: AbortSignal): Promise<void> {
    const browser = await this.#browserFor(run, signal);
    held.browserId = browser.id;
    held.liveViewUrl = browser.liveViewUrl;
    if (signal.aborted) throw new RunStopped();
  }

  /** Provisions (or reuses) the run's browser, announces it and connects over CDP. */
  async #openBrowser(run: RunRow, held: Held, signal: AbortSignal): Promise<Browser> {
    const { repo, events, clients } = this.#d;
    if (!held.browserId) await this.#provision(run, held, signal);
    const browserId = held.browserId!;
    await repo.setRunBrowser(run.id, browserId);
    await events.append(run.id, 'browser.ready', { browserId, liveViewUrl: held.liveViewUrl });
    const { websocketUrl } = await clients.browserPool.api.getCdpEndpoint({ projectId: run.projectId, browserId });
    const cdp = await puppeteer.connect({ browserWSEndpoint: websocketUrl, defaultViewport: null, protocolTimeout: this.#d.limits.actionTimeoutMs * 2 });
    held.cdp = cdp;
    // A pool restart or a browser crash: the run ends at once with that reason, not at its next timeout.
    cdp.once('disconnected', () => held.cdp === cdp && held.lost?.());
    if (signal.aborted) throw new RunStopped();
    return cdp;
  }

  /** A browsercode turn's browser ends with it (the next turn provisions a fresh one). Idempotent. */
  async #endTurnBrowser(run: RunRow, held: Held, signal: AbortSignal): Promise<void> {
    const { browserId } = held;
    if (!browserId) return;
    held.browserId = undefined;
    const { cdp } = held;
    held.cdp = undefined; // let go on purpose: not a lost browser
    await cdp?.disconnect().catch(() => undefined);
    const reason = signal.aborted ? StopReason.STOP_REASON_RUN_STOPPED : StopReason.STOP_REASON_RUN_ENDED;
    await this.#d.clients.browserPool.api
      .stopBrowser({ projectId: run.projectId, browserId, reason }, { deadlineMs: 30000 })
      .catch((err: Error) => this.#d.logger.warn({ runId: run.id, browserId, err: err.message }, 'could not stop the browser'));
  }

  /** Stores what changed in the run's directory as its output files; announces each. Returns why files were not stored. */
  async #syncOutputs(run: RunRow, dir: string, manifest: DiskManifest, stored: Set<string>, signal?: AbortSignal): Promise<string[]> {
    if (!run.diskId) return [];
    const max = this.#d.limits.maxOutputFiles ?? 1000;
    const { written, deleted, skipped, overCap } = await syncDisk(this.#d.clients.fileStorage, run.projectId, run.diskId, run.id, dir, manifest, { signal }, { max, stored });
    for (const s of skipped) {
      manifest.set(s.path, s.sha256); // not tried again until it changes
      await this.#d.events.append(run.id, 'file.skipped', { path: s.path, reason: s.reason });
    }
    const reasons = skipped.map((s) => `${s.reason}; it was not stored`);
    if (overCap.length) {
      // One event for all of them: a command that writes thousands of files does not flood the run's events.
      for (const s of overCap) manifest.set(s.path, s.sha256);
      const reason = `the run reached its limit of ${max} output files: ${overCap.length} more ${overCap.length === 1 ? 'file was' : 'files were'} not stored`;
      await this.#d.events.append(run.id, 'file.skipped', { path: overCap[0]!.path, reason, count: overCap.length });
      reasons.push(`${reason} (the first: ${overCap[0]!.path})`);
    }
    for (const e of written) {
      manifest.set(e.path, e.sha256);
      await this.#d.events.append(run.id, 'file.written', { path: e.path, sizeBytes: Number(e.sizeBytes), sha256: e.sha256 });
    }
    for (const p of deleted) {
      manifest.delete(p);
      await this.#d.events.append(run.id, 'file.deleted', { path: p });
    }
    return reasons;
  }

  /**
   * A run taken over from a dead worker: takes its browser back (the same one, through the pool;
   * gone = the run cannot go on), tells its events it resumed, and rebuilds the loop from its
   * checkpoints. A browsercode command cut short is answered as interrupted, for the model to judge.
   */
  async #resume(run: RunRow, takeover: Takeover, held: Held, signal: AbortSignal): Promise<LoopResume> {
    const { repo, events, capacity } = this.#d;
    const code = run.agent === 'browsercode';
    if (run.browserId) {
      const kept = await capacity.claimKept(run, run.browserId, signal);
      if (kept) {
        held.browserId = kept.id;
        held.liveViewUrl = kept.liveViewUrl;
      } else if (!code) {
        await repo.closeSession(run.sessionId, 'browser stopped');
        throw new CannotResume(`The run was interrupted (${takeover.reason}) and could not be resumed on another worker: its browser is gone (stopped or not found), so the session is closed; start a new conversation`);
      }
    }
    const checkpoints = await repo.checkpoints(run.id);
    const state = checkpoints.at(-1)?.state;
    const lastStep = await repo.lastStepNumber(run.id);
    const history = checkpoints.map((c) => c.memory as StepMemory);
    const browserSteps = Math.max(state?.browserSteps ?? 0, lastStep);
    let steps = (state?.steps ?? 0) + Math.max(0, lastStep - (state?.browserSteps ?? 0));
    const notes = [`This run was resumed on another worker (${takeover.reason}) after ${steps} action(s); ${code ? 'the disk holds what earlier commands stored' : 'the browser is as the last step left it'}.`];
    const call = code ? await repo.unansweredToolCall(run.id) : undefined;
    const cut = call && typeof call.number === 'number' && call.number > steps ? call : undefined;
    if (cut) {
      steps = cut.number as number;
      const tool = String(cut.tool);
      const input = (cut.input && typeof cut.input === 'object' ? cut.input : {}) as Record<string, unknown>;
      await events.append(run.id, 'tool.result', { number: cut.number, tool, ok: false, error: INTERRUPTED_COMMAND_ERROR });
      history.push({ thought: String(cut.thought ?? ''), action: { name: tool, ...input } as Action, error: INTERRUPTED_COMMAND_ERROR });
      notes.push(`Your last ${tool} call was cut short: ${INTERRUPTED_COMMAND_ERROR}`);
    }
    if (!(await repo.hasEvent(run.id, 'run.started'))) await events.append(run.id, 'run.started', { model: run.model });
    await events.append(run.id, 'run.resumed', { reason: takeover.reason, takeover: takeover.count, fromStep: browserSteps, actions: steps });
    this.#d.logger.info({ runId: run.id, takeover: takeover.count, fromStep: browserSteps, actions: steps }, 'run resumed');
    // The builtin cannot judge whether to run a cut command again (a failed instruction ends its runs): the run ends, saying why.
    if (cut && run.model === 'builtin') {
      throw new CannotResume(`The run was resumed on another worker (${takeover.reason}), but the ${String(cut.tool)} call it was making then was interrupted and may have partly run; the builtin model does not repeat it, so the run ends here`);
    }
    return { history, steps, browserSteps, model: state?.model, notes };
  }

  /** Runs one claimed run to its end (`takeover`: one taken over from a dead worker goes on where it was). Never throws. */
  async execute(run: RunRow, stop: AbortSignal, takeover?: Takeover): Promise<void> {
    const { repo, events, clients, logger } = this.#d;
    const log = logger.child({ runId: run.id });
    // A run taken over gets a folder of its own: the dead worker's (on the same host) is reaped by whoever starts next.
    const workName = takeover ? `${run.id}.takeover-${takeover.count}` : run.id;
    let workDir = path.join(this.#d.workDir, workName);
    // The paths this run stored as output files (counted against its limit).
    const stored = new Set<string>();
    const code = run.agent === 'browsercode';
    // The run's work ends when it is stopped, at its time limit (whatever a step is doing) or when its browser is lost.
    const deadline = this.#deadline(run);
    const guard = new RunGuard(stop, deadline, {
      graceMs: this.#d.limits.stopGraceMs,
      // A step that ignores the abort: the run still ends at its limit (its lease, then its slot, follow).
      overdue: () => void this.#failStuck(run, TIME_LIMIT_ERROR).catch((err: Error) => log.warn({ err: err.message }, 'could not fail a stuck run')),
    });
    const { signal } = guard;
    const handedOver = () => stop.aborted && stop.reason instanceof HandedOver;
    const held: Held = { lost: () => guard.cut(new BrowserLost()) };
    let manifest: DiskManifest | undefined;
    let tenant: Tenant | undefined;
    let released = false;
    let resume: LoopResume | undefined;
    try {
      if (takeover) resume = await this.#resume(run, takeover, held, signal);
      // A browser-agent run needs its browser first: at the project's browser limit it waits queued.
      if (!code && !held.browserId && !(await this.#browserOrWait(run, held, signal))) return;
      if (!resume) await events.append(run.id, 'run.started', { model: run.model });
      // Held before the work folder exists, so a crash from here on leaves a record to reap.
      tenant = await this.#d.tenancy?.acquire(workName);
      if (tenant) workDir = tenant.dir;
      const model = this.#d.models.create(run.model, run.task, code ? 'code' : 'browser');
      manifest = run.diskId ? await materializeDisk(clients.fileStorage, run.projectId, run.diskId, workDir, { signal }) : new Map<string, string>();
      if (signal.aborted) throw new RunStopped();

      // What both agent loops take.
      const loop = {
        downloads: poolDownloads(clients, run.projectId, () => held.browserId, this.#d.limits.actionTimeoutMs * 3),
        model,
        task: run.task,
        turns: await repo.turns(run.sessionId, run.id),
        diskDir: workDir,
        maxSteps: this.#d.limits.maxSteps,
        deadline,
        actionTimeoutMs: this.#d.limits.actionTimeoutMs,
        signal,
        recordStep: (step: RecordedStep) => this.#recordStep(run, step, signal),
        saveCheckpoint: async (c: LoopCheckpoint) => {
          if (!(await repo.saveCheckpoint(run.id, c))) throw new RunStopped();
        },
        resume,
        recordUsage: async (usage: Usage) => {
          await repo.addUsage(run.id, { ...usage, costUsd: this.#d.price(run.model, usage) });
        },
      };
      let result: string;
      if (code) {
        const files = manifest;
        result = await runBrowsercode({
          ...loop,
          terminal: tenant ? { ...this.#d.terminal, user: tenant.user ?? this.#d.terminal.user, cgroups: tenant.cgroups, scratchDir: tenant.scratchDir } : this.#d.terminal,
          openBrowser: () => this.#openBrowser(run, held, signal),
          emit: (type, data) => events.append(run.id, type, data).then(() => undefined),
          syncOutputs: () => this.#syncOutputs(run, workDir, files, stored, signal),
        });
        await this.#syncOutputs(run, workDir, manifest, stored);
        await this.#endTurnBrowser(run, held, stop); // stopped before the run reads completed
      } else {
        const browser = await this.#openBrowser(run, held, signal);
        result = await runBrowserAgent({ ...loop, browser, diskFiles: [...manifest.keys()], maxModelFailures: this.#d.limits.maxModelFailures });
        // Extractions too long for the answer and the files the browser downloaded were saved on the disk: they are output files.
        const notStored = await this.#syncOutputs(run, workDir, manifest, stored);
        if (notStored.length) result = [result, ...notStored].join('\n');
        // Released before the run reads completed, so a follow-up sent at once finds the browser free.
        released = await this.#releaseKept(run, held);
      }
      if (await repo.finish(run.id, ['running'], 'completed', { result })) await events.append(run.id, 'run.completed', { result });
    } catch (err) {
      // browsercode keeps what a failed or stopped turn wrote: the session goes on.
      if (code && manifest) await this.#syncOutputs(run, workDir, manifest, stored).catch((e: Error) => log.warn({ err: e.message }, 'could not store the files of an unfinished run'));
      // The service's own reason (time limit, lost browser) wins over what the interrupted step threw.
      const cut = guard.cutShort ?? (held.cdp && !held.cdp.connected ? new BrowserLost() : undefined);
      if (handedOver()) {
        log.info('run work ended: handed over to another worker');
      } else if (!cut && (signal.aborted || err instanceof RunStopped)) {
        log.info('run stopped');
      } else {
        const message = cut ? failureMessage(cut) : failureMessage(err);
        if (!message) log.error({ err }, 'run failed unexpectedly');
        const error = message ?? 'The run failed because of an internal error';
        // A run ended by a limit keeps the best answer it had: the reason in error, that answer in result.
        const partial = !cut && err instanceof LimitReached ? err.partial : undefined;
        if (await repo.finish(run.id, ['running'], 'failed', { error, ...(partial ? { result: partial } : {}) })) await events.append(run.id, 'run.failed', { error });
      }
    } finally {
      guard.dispose();
      const { cdp } = held;
      held.cdp = undefined;
      await cdp?.disconnect().catch(() => undefined);
      // Everything its commands started goes with the work folder.
      if (tenant) await tenant.release().catch((err: Error) => log.warn({ err: err.message }, 'could not release the run’s terminal'));
      else await fs.rm(workDir, { recursive: true, force: true }).catch(() => undefined);
      const { browserId } = held;
      if (handedOver()) {
        // The run goes on elsewhere with the same browser (see #resume): nothing of it is released.
      } else if (code) {
        await this.#endTurnBrowser(run, held, stop);
      } else if (browserId) {
        // By what the run's record says, not by the signal: a lease renewal may abort a run that just ended.
        const status = (await repo.run(run.id).catch(() => undefined))?.status;
        if (status === 'stopped') {
          // Its browser ends with it, also one StopRun did not know yet (the run was stopped while it started).
          await this.#d.capacity.stopForStoppedRun(run, browserId);
        } else if (!released) {
          await this.#releaseKept(run, held);
        }
      }
    }
  }

  async #failStuck(run: RunRow, error: string): Promise<void> {
    this.#d.logger.error({ runId: run.id }, 'run still busy after its time limit and a grace; it is failed, the stuck work left to end');
    if (await this.#d.repo.finish(run.id, ['running'], 'failed', { error })) await this.#d.events.append(run.id, 'run.failed', { error });
  }

  /** Provisions a browser-agent run's browser; false when the run went back to queued to wait for a browser slot. */
  async #browserOrWait(run: RunRow, held: Held, signal: AbortSignal): Promise<boolean> {
    try {
      await this.#provision(run, held, signal);
      return true;
    } catch (err) {
      if (!(err instanceof BrowserLimitReached)) throw err;
      if (!(await this.#d.capacity.requeue(run, err))) throw new RunStopped();
      return false;
    }
  }

  async #recordStep(run: RunRow, step: RecordedStep, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new RunStopped();
    let key: string | null = null;
    if (step.screenshot) {
      key = `runs/${run.id}/step-${step.number}.jpg`;
      await putObject(this.#d.clients, run.projectId, key, 'image/jpeg', step.screenshot).catch((err: Error) => {
        this.#d.logger.warn({ runId: run.id, err: err.message }, 'screenshot not stored');
        key = null;
      });
    }
    // Refused once the run has ended (stopped, or failed by another worker): it ends here too.
    if (!(await this.#d.repo.insertStep({ runId: run.id, number: step.number, url: step.url, action: step.action, thought: step.thought, screenshotKey: key, ts: step.startedAt.toISOString(), durationMs: step.durationMs }, step.checkpoint))) throw new RunStopped();
    const downloads = step.downloads?.map((d) => ({ name: d.name, sizeBytes: d.sizeBytes, contentType: d.contentType, ...(d.diskPath ? { path: d.diskPath } : {}) }));
    await this.#d.events.append(run.id, 'step', { number: step.number, url: step.url, action: step.action, thought: step.thought, durationMs: step.durationMs, actionMs: step.actionMs, ...(downloads ? { downloads } : {}) });
  }
}

