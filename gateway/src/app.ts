/**
 * The gateway's Express app (does not listen): request ids, CORS, health, OpenAPI, then /api/v1
 * with key auth (and scope), rate limits, JSON parsing with a size cap, validation from the route
 * table, Idempotency-Key on every POST, the MCP server at /mcp, and one error handler.
 */
import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { INVALID_CURSOR_MESSAGE, RemoteError, Status } from '../../services/common/src/errors.js';
import { isRequestId, redactUrl, REQUEST_ID_HEADER, type Logger } from '../../services/common/src/logger.js';
import type { ApiKeyAuthenticator } from './auth.js';
import type { Clients } from './clients.js';
import { corsMiddleware } from './cors.js';
import { idempotencyKey, type Idempotency } from './idempotency.js';
import type { RateLimiter } from './rate-limit.js';
import { dashboardRouter, type DashboardOptions } from './dashboard.js';
import { checkHealth, Readiness } from './health.js';
import { HttpError, errorMiddleware } from './http-errors.js';
import { mcpEndpoint } from './mcp-endpoint.js';
import { buildOpenApi } from './openapi.js';
import type { ReadinessReply } from './schemas.js';
import { agentRoutes, type AgentSource } from './routes/agents.routes.js';
import { apiKeyRoutes } from './routes/api-keys.routes.js';
import { browserRoutes } from './routes/browsers.routes.js';
import { fileRoutes } from './routes/files.routes.js';
import type { RouteDef } from './routes/route.js';
import { runRoutes } from './routes/runs.routes.js';
import { webhookRoutes } from './routes/webhooks.routes.js';
import { isAgentName } from '../../services/common/src/agent-name.js';
import { RequestValidationError, coerceQuery, hasNul, validate, validator } from './validation.js';

export const API_VERSION = '0.1.0';

export interface GatewayDeps {
  logger: Logger;
  clients: Clients;
  auth: ApiKeyAuthenticator;
  bodyLimitBytes: number;
  healthDeadlineMs?: number;
  /** Drained by main at shutdown; default: always ready. */
  readiness?: Readiness;
  /** Overrides where GET /agents reads the registry (benchmark baseline). */
  agentSource?: AgentSource;
  /** Serves the built dashboard at `/` when given. */
  dashboard?: DashboardOptions;
  /** Idempotency-Key support on every POST; without it the header is ignored. */
  idempotency?: Idempotency;
  /** Per-key rate limits; none without it. */
  rateLimiter?: RateLimiter;
  /** Origins allowed to call the API from a browser (CORS); none by default. */
  corsOrigins?: readonly string[];
}

/** Every public route, in the order they are matched. */
export function allRoutes(agentSource?: AgentSource): RouteDef[] {
  return [...agentRoutes(agentSource), ...runRoutes(), ...fileRoutes(), ...browserRoutes(), ...apiKeyRoutes(), ...webhookRoutes()];
}

/** The id parameters of the routes, with the resource each names (as the services' 404s say). */
const PATH_IDS: Record<string, string> = { runId: 'Run', sessionId: 'Session', browserId: 'Browser', profileId: 'Profile', workspaceId: 'Workspace', apiKeyId: 'API key', webhookId: 'Webhook', deliveryId: 'Delivery' };

function requestIds(req: Request, res: Response, next: NextFunction): void {
  const given = req.get(REQUEST_ID_HEADER);
  const id = isRequestId(given) ? given : randomUUID();
  res.locals.requestId = id;
  res.set('X-Request-Id', id);
  next();
}

function accessLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      logger.debug({ requestId: res.locals.requestId, method: req.method, path: redactUrl(req.originalUrl), status: res.statusCode, ms }, 'request');
    });
    next();
  };
}

/** A body is required when the route declares one; a non-JSON body is refused with 415. */
function readBody(def: RouteDef, req: Request): unknown {
  if (!def.body) return undefined;
  const hasContent = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
  if (hasContent && !req.is('application/json')) throw new HttpError(415, 'Content-Type must be application/json');
  if (req.body === undefined) throw new RequestValidationError([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
  return validate(def.body, req.body, 'body');
}

export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestIds);
  app.use(accessLog(deps.logger));
  app.use(corsMiddleware(deps.corsOrigins ?? []));

  const routes = allRoutes(deps.agentSource);
  // Compile every validator now: a schema mistake stops the start, not a request.
  for (const r of routes) for (const schema of [r.body, r.query]) if (schema) validator(schema);
  const openapi = buildOpenApi(routes, API_VERSION);

  app.get('/livez', (_req, res) => {
    res.json({ status: 'ok' });
  });
  const readiness = deps.readiness ?? new Readiness();
  app.get('/readyz', (_req, res) => {
    const reply: ReadinessReply = readiness.draining ? { status: 'draining' } : { status: 'ready' };
    res.status(readiness.draining ? 503 : 200).json(reply);
  });
  app.get('/healthz', async (_req, res) => {
    const report = await checkHealth(deps.clients, deps.healthDeadlineMs ?? 1000);
    res.status(report.status === 'ok' ? 200 : 503).json(report);
  });
  app.get('/openapi.json', (_req, res) => {
    res.json(openapi);
  });

  const api = express.Router();
  api.use(deps.auth.middleware());
  if (deps.rateLimiter) api.use(deps.rateLimiter.middleware());
  // Only a route that takes a body reads one: a body sent to any other route is ignored, not parsed.
  const json = express.json({ limit: deps.bodyLimitBytes, strict: false });
  api.param('agent', (_req, _res, next, agent: string) => {
    if (!isAgentName(agent)) return next(new HttpError(404, 'Agent not found'));
    return next();
  });
  for (const [param, resource] of Object.entries(PATH_IDS)) {
    // An id with a NUL names nothing that exists (and no database could look it up).
    api.param(param, (_req, _res, next, id: string) => next(hasNul(id) ? new HttpError(404, `${resource} not found`) : undefined));
  }
  for (const def of routes) {
    api[def.method](def.path, ...(def.body ? [json] : []), async (req: Request, res: Response) => {
      const body = readBody(def, req);
      const query = def.query ? validate(def.query, coerceQuery(def.query, req.query as Record<string, unknown>), 'query') : {};
      const projectId = res.locals.projectId as string;
      const run = () =>
        def
          .handler({ projectId, requestId: res.locals.requestId as string, params: req.params as Record<string, string>, body, query, clients: deps.clients, keys: deps.auth.keys, req, res })
          .catch((err: unknown) => {
            // A service that refused the cursor: a 422 at the cursor, like any bad query.
            const cursor = (query as { cursor?: unknown }).cursor;
            if (cursor && err instanceof RemoteError && err.code === Status.INVALID_ARGUMENT && err.publicMessage === INVALID_CURSOR_MESSAGE) {
              throw new RequestValidationError([{ type: 'value_error', loc: ['query', 'cursor'], msg: `Value error, ${err.publicMessage}`, input: cursor }]);
            }
            throw err;
          });
      // Checked after validation: a request refused as invalid claims no key (a corrected retry may reuse it).
      const key = def.method === 'post' && deps.idempotency ? idempotencyKey(req) : undefined;
      if (key) {
        return deps.idempotency!.respond(projectId, key, req, res, async () => {
          const out = await run();
          return { status: def.success.status, body: out === undefined ? null : JSON.stringify(out) };
        });
      }
      const out = await run();
      if (res.headersSent) return;
      if (out === undefined) res.status(def.success.status).end();
      else res.status(def.success.status).json(out);
    });
  }
  app.use('/api/v1', api);
  app.use(mcpEndpoint({ auth: deps.auth, bodyLimitBytes: deps.bodyLimitBytes }));
  if (deps.dashboard) app.use(dashboardRouter(deps.dashboard));
  app.use((_req, res) => {
    res.status(404).json({ detail: 'Not Found' });
  });
  app.use(errorMiddleware(deps.logger));
  return app;
}
