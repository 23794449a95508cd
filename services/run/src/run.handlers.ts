/** RunService handlers: proto ↔ domain. */
import type * as grpc from '@grpc/grpc-js';
import type { Handlers } from '../../common/src/grpc.js';
import { RunStatus, SessionStatus, type Run, type RunServiceService, type Session } from '../../../gen/ats/run/v1/run.js';
import { agentEnum, agentName, requireAgentName } from '../../common/src/agent-name.js';
import { AGENTS } from './agents.js';
import { toRunEvent } from './run-events.js';
import type { Runs } from './runs.js';
import type { RunRow, RunStatus as Status, SessionRow } from './run.repository.js';

const STATUS: Record<Status, RunStatus> = {
  queued: RunStatus.RUN_STATUS_QUEUED,
  running: RunStatus.RUN_STATUS_RUNNING,
  completed: RunStatus.RUN_STATUS_COMPLETED,
  stopped: RunStatus.RUN_STATUS_STOPPED,
  failed: RunStatus.RUN_STATUS_FAILED,
};
const STATUS_NAME = new Map(Object.entries(STATUS).map(([k, v]) => [v, k as Status]));

const opt = (v: string | null) => v ?? undefined;

export function runOut(r: RunRow): Run {
  return {
    id: r.id,
    projectId: r.projectId,
    agent: agentEnum(r.agent),
    status: STATUS[r.status],
    sessionId: r.sessionId,
    browserId: opt(r.browserId),
    workspaceId: opt(r.workspaceId),
    model: r.model,
    task: r.task,
    result: opt(r.result),
    error: opt(r.error),
    totalCostUsd: r.totalCostUsd,
    totalInputTokens: r.totalInputTokens,
    totalOutputTokens: r.totalOutputTokens,
    missingFileIds: r.missingFileIds,
    createdAt: r.createdAt,
    startedAt: opt(r.startedAt),
    finishedAt: opt(r.finishedAt),
    updatedAt: r.updatedAt,
  };
}

function sessionOut(s: SessionRow): Session {
  return {
    id: s.id,
    projectId: s.projectId,
    agent: agentEnum(s.agent),
    status: s.status === 'closed' ? SessionStatus.SESSION_STATUS_CLOSED : SessionStatus.SESSION_STATUS_OPEN,
    busy: s.busy,
    latestRunId: opt(s.latestRunId),
    browserId: opt(s.browserId),
    workspaceId: opt(s.workspaceId),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    closedReason: opt(s.closedReason),
  };
}


export function runHandlers(runs: Runs): Handlers<typeof RunServiceService> {
  return {
    async listAgents() {
      return { agents: [...AGENTS] };
    },
    async listModels() {
      return runs.models();
    },
    async createRun(req) {
      const run = await runs.create({
        projectId: req.projectId,
        agent: requireAgentName(req.agent),
        task: req.task,
        model: req.model,
        browser: req.browser ? { proxyCountryCode: req.browser.proxyCountryCode, screenWidth: req.browser.screenWidth, screenHeight: req.browser.screenHeight, profileId: req.browser.profileId, stealth: req.browser.stealth, locale: req.browser.locale, timezone: req.browser.timezone, allowedDomains: req.browser.allowedDomains, blockAds: req.browser.blockAds } : undefined,
        sessionId: req.sessionId,
        attachedFileIds: req.attachedFileIds,
        workspaceId: req.workspaceId,
      });
      return { run: runOut(run) };
    },
    async getRun(req) {
      return { run: runOut(await runs.get(req.projectId, agentName(req.agent), req.runId)) };
    },
    async listRuns(req) {
      const status = STATUS_NAME.get(req.status);
      const page = await runs.list(req.projectId, requireAgentName(req.agent), { ...(req.sessionId ? { sessionId: req.sessionId } : {}), ...(status ? { status } : {}) }, req.limit, req.cursor);
      return { items: page.items.map(runOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async stopRun(req) {
      return { run: runOut(await runs.stop(req.projectId, agentName(req.agent), req.runId)) };
    },
    async listSteps(req) {
      const page = await runs.steps(req.projectId, agentName(req.agent), req.runId, req.after, req.limit);
      return {
        steps: page.steps.map((s) => ({ number: s.number, url: opt(s.url), action: s.action, thought: opt(s.thought), screenshotUrl: opt(s.screenshotUrl), ts: s.ts, durationMs: s.durationMs })),
        nextAfter: page.nextAfter,
        hasMore: page.hasMore,
      };
    },
    async listEvents(req) {
      const page = await runs.events(req.projectId, agentName(req.agent), req.runId, req.after, req.limit);
      return { events: page.events.map(toRunEvent), nextAfter: page.nextAfter, hasMore: page.hasMore };
    },
    async watchEvents(req, call) {
      const ctl = new AbortController();
      const w = call as grpc.ServerWritableStream<unknown, unknown>;
      w.on('cancelled', () => ctl.abort());
      w.on('close', () => ctl.abort());
      for await (const ev of await runs.watch(req.projectId, agentName(req.agent), req.runId, req.after, ctl.signal)) {
        if (!w.write({ event: toRunEvent(ev) })) await new Promise((r) => w.once('drain', r));
      }
    },
    async getSession(req) {
      return { session: sessionOut(await runs.session(req.projectId, requireAgentName(req.agent), req.sessionId)) };
    },
    async listSessions(req) {
      const status = req.status === SessionStatus.SESSION_STATUS_OPEN ? 'open' : req.status === SessionStatus.SESSION_STATUS_CLOSED ? 'closed' : null;
      const page = await runs.sessions(req.projectId, requireAgentName(req.agent), status, req.limit, req.cursor);
      return { items: page.items.map(sessionOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
  };
}
