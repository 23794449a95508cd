import * as grpc from '@grpc/grpc-js';
import { RunStatus } from '../../../gen/ats/run/v1/run.js';
import * as s from '../schemas.js';
import type { FromSchema } from '../json-schema.js';
import { agentEnum } from '../../../services/common/src/agent-name.js';
import { RUN_STATUS, page, presentEvent, presentRun, presentRunCreated, presentRunStatus, presentSession, presentStep, required } from '../presenters.js';
import { fromServiceError } from '../../../services/common/src/errors.js';
import { checkBrowserOptions, checkTaskInsideDomains } from '../browser-options.js';
import { HttpError } from '../http-errors.js';
import { route, type RouteContext, type RouteDef } from './route.js';

type AgentContext = RouteContext<{ agent: s.AgentName }>;
type RunContext = RouteContext<{ agent: s.AgentName; runId: string }>;

const agentOf = (ctx: AgentContext) => agentEnum(ctx.params.agent);
const ref = (ctx: RunContext) => ({ projectId: ctx.projectId, agent: agentOf(ctx), runId: ctx.params.runId });
const opts = (ctx: RouteContext) => ({ requestId: ctx.requestId });

/** Writes one server-sent event. */
function writeSse(ctx: RouteContext, e: s.EventReply): void {
  ctx.res.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
}

/** SSE of a run's events: backlog then live, ends after the terminal event; resumes from Last-Event-ID or ?after=. */
async function streamEvents(ctx: RouteContext<RunContext['params'], unknown, FromSchema<typeof s.eventsQuery>>): Promise<undefined> {
  const lastId = Number(ctx.req.get('last-event-id') ?? ctx.query.after ?? 0);
  // Event ids are 32-bit on the wire: a larger Last-Event-ID has seen them all.
  const after = Number.isInteger(lastId) && lastId >= 0 ? Math.min(lastId, 2 ** 31 - 1) : 0;
  let heartbeat: NodeJS.Timeout | undefined;
  const open = () => {
    if (ctx.res.headersSent) return;
    ctx.res.status(200).set({ 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
    ctx.res.flushHeaders();
    heartbeat = setInterval(() => ctx.res.write(': keep-alive\n\n'), 15000);
  };
  // A stream fails at once while the run service restarts (a unary call would wait): wait for a
  // connection, and try again while none is found (each wait is at most CONNECT_WAIT_MS; a loaded
  // machine can take longer than one reconnect pause to connect).
  for (let attempt = 1; ; attempt++) {
    await ctx.clients.run.connected();
    const call = ctx.clients.run.api.watchEvents({ ...ref(ctx), after }, opts(ctx));
    const onClose = () => call.cancel();
    ctx.req.on('close', onClose);
    const retry = await new Promise<boolean>((resolve, reject) => {
      call.on('data', (msg: { event?: Parameters<typeof presentEvent>[0] }) => {
        open();
        if (msg.event) writeSse(ctx, presentEvent(msg.event));
      });
      call.on('metadata', open);
      call.on('end', () => resolve(false));
      call.on('error', (err: Error & { code?: number }) => {
        if (ctx.res.headersSent || err.code === grpc.status.CANCELLED) return resolve(false); // after it opened, the stream just ends
        if (err.code === grpc.status.UNAVAILABLE && attempt < 3 && !ctx.req.destroyed) return resolve(true);
        reject(fromServiceError(err)); // an ordinary HTTP error: 404 for an unknown or foreign run, as on every route
      });
    }).finally(() => ctx.req.off('close', onClose));
    if (!retry) break;
  }
  clearInterval(heartbeat);
  if (!ctx.res.writableEnded) ctx.res.end();
  return undefined;
}

export function runRoutes(): RouteDef[] {
  return [
    route({
      method: 'post',
      path: '/agents/:agent/runs',
      operationId: 'createRun',
      summary: 'Start a run: one task in plain language (returns at once, status queued)',
      tag: 'runs',
      body: s.createRunBody,
      success: { status: 202, schema: s.runCreated },
      errors: [400, 404, 409],
      handler: async (ctx) => {
        const b = ctx.body;
        if (b.workspace_id !== undefined && ctx.params.agent !== 'browsercode') {
          throw new HttpError(400, 'workspace_id is only supported by the browsercode agent');
        }
        checkTaskInsideDomains(b.task, b.browser?.allowed_domains);
        await checkBrowserOptions(ctx, { profileId: b.browser?.profile_id, proxyCountryCode: b.browser?.proxy_country_code, timezone: b.browser?.timezone }, ['body', 'browser', 'proxy_country_code'], 'allow');
        const res = await ctx.clients.run.api.createRun(
          {
            projectId: ctx.projectId,
            agent: agentOf(ctx),
            task: b.task,
            model: b.model,
            browser: b.browser && {
              proxyCountryCode: b.browser.proxy_country_code,
              screenWidth: b.browser.screen_width,
              screenHeight: b.browser.screen_height,
              profileId: b.browser.profile_id,
              stealth: b.browser.stealth,
              locale: b.browser.locale,
              timezone: b.browser.timezone,
              allowedDomains: b.browser.allowed_domains ?? [],
              blockAds: b.browser.block_ads,
            },
            sessionId: b.session_id,
            attachedFileIds: b.attached_file_ids ?? [],
            workspaceId: b.workspace_id,
          },
          // A create that commits must not read as a timeout (a retry would start a second run): it may take long under a burst.
          { ...opts(ctx), deadlineMs: 30000 },
        );
        return presentRunCreated(required(res.run, 'run'), ctx.params.agent);
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs',
      operationId: 'listRuns',
      summary: "List the project's runs of this agent",
      tag: 'runs',
      query: s.listRunsQuery,
      success: { status: 200, schema: s.runList },
      handler: async (ctx) => {
        const q = ctx.query;
        const res = await ctx.clients.run.api.listRuns(
          { projectId: ctx.projectId, agent: agentOf(ctx), sessionId: q.session_id ?? '', status: q.status ? RUN_STATUS[q.status] : RunStatus.RUN_STATUS_UNSPECIFIED, limit: q.limit ?? 50, cursor: q.cursor ?? '' },
          opts(ctx),
        );
        return page(res, presentRun);
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId',
      operationId: 'getRun',
      summary: 'Read the full run object',
      tag: 'runs',
      success: { status: 200, schema: s.run },
      errors: [404],
      handler: async (ctx) => presentRun(required((await ctx.clients.run.api.getRun(ref(ctx), opts(ctx))).run, 'run')),
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId/status',
      operationId: 'getRunStatus',
      summary: 'Poll a run cheaply: status, result, output, cost',
      tag: 'runs',
      success: { status: 200, schema: s.runStatus },
      errors: [404],
      handler: async (ctx) => presentRunStatus(required((await ctx.clients.run.api.getRun(ref(ctx), opts(ctx))).run, 'run')),
    }),
    route({
      method: 'post',
      path: '/agents/:agent/runs/:runId/stop',
      operationId: 'stopRun',
      summary: 'Stop a queued or running run',
      tag: 'runs',
      success: { status: 200, schema: s.run },
      errors: [404, 409],
      handler: async (ctx) => presentRun(required((await ctx.clients.run.api.stopRun(ref(ctx), opts(ctx))).run, 'run')),
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId/steps',
      operationId: 'listSteps',
      summary: "A run's browser steps after step number `after`",
      tag: 'runs',
      query: s.stepsQuery,
      success: { status: 200, schema: s.stepList },
      errors: [404],
      handler: async (ctx) => {
        const q = ctx.query;
        const res = await ctx.clients.run.api.listSteps({ ...ref(ctx), after: q.after ?? 0, limit: q.limit ?? 50 }, opts(ctx));
        return { steps: res.steps.map(presentStep), nextAfter: res.nextAfter, hasMore: res.hasMore };
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId/events',
      operationId: 'listEvents',
      summary: "A run's events after event id `after`",
      tag: 'runs',
      query: s.eventsQuery,
      success: { status: 200, schema: s.eventList },
      errors: [404],
      handler: async (ctx) => {
        const q = ctx.query;
        const res = await ctx.clients.run.api.listEvents({ ...ref(ctx), after: q.after ?? 0, limit: q.limit ?? 50 }, opts(ctx));
        return { events: res.events.map(presentEvent), nextAfter: res.nextAfter, hasMore: res.hasMore };
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId/events/stream',
      operationId: 'streamEvents',
      summary: "Server-sent events of a run's events (resumes from Last-Event-ID); ends after the terminal event",
      tag: 'runs',
      query: s.eventsQuery,
      success: { status: 200, contentType: 'text/event-stream', description: 'text/event-stream of events' },
      errors: [404],
      handler: streamEvents,
    }),
    route({
      method: 'get',
      path: '/agents/:agent/sessions',
      operationId: 'listSessions',
      summary: "List the project's sessions of this agent",
      tag: 'sessions',
      query: s.pageQuery,
      success: { status: 200, schema: s.sessionList },
      handler: async (ctx) => {
        const q = ctx.query;
        const res = await ctx.clients.run.api.listSessions({ projectId: ctx.projectId, agent: agentOf(ctx), status: 0, limit: q.limit ?? 50, cursor: q.cursor ?? '' }, opts(ctx));
        return page(res, presentSession);
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/sessions/:sessionId',
      operationId: 'getSession',
      summary: 'Read a session (conversation)',
      tag: 'sessions',
      success: { status: 200, schema: s.session },
      errors: [404],
      handler: async (ctx) =>
        presentSession(required((await ctx.clients.run.api.getSession({ projectId: ctx.projectId, agent: agentOf(ctx), sessionId: ctx.params.sessionId }, opts(ctx))).session, 'session')),
    }),
  ];
}
