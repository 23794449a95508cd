/** The OpenAPI 3.1 document, built from the same route table and schemas the gateway validates with. */
import type { JsonSchema } from './json-schema.js';
import * as s from './schemas.js';
import * as w from './webhook-schemas.js';
import type { RouteDef } from './routes/route.js';

/**
 * Every resource and request body of the API by name. The document declares each once under
 * `components/schemas` and refers to it by `$ref` wherever the very same schema object appears,
 * so a client generated from it gets named types (`Run`, `Browser`, …), not anonymous ones.
 */
export const NAMED_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  Agent: s.agentInfo,
  AgentList: s.agentsResponse,
  Model: s.modelInfo,
  ModelList: s.modelList,
  RunCreated: s.runCreated,
  Run: s.run,
  RunStatus: s.runStatus,
  RunList: s.runList,
  Step: s.step,
  StepList: s.stepList,
  Event: s.event,
  EventList: s.eventList,
  Session: s.session,
  SessionList: s.sessionList,
  FileUpload: s.fileUpload,
  FileUploadList: s.uploadItems,
  File: s.fileItem,
  FileList: s.fileList,
  WorkspaceFileList: s.workspaceFileList,
  Workspace: s.workspace,
  WorkspaceList: s.workspaceList,
  Browser: s.browser,
  BrowserList: s.browserList,
  Recording: s.recording,
  LiveViewLink: s.liveViewLink,
  Download: s.download,
  DownloadList: s.downloadList,
  Profile: s.profile,
  ProfileList: s.profileList,
  Error: s.errorResponse,
  ValidationError: s.validationErrorResponse,
  ValidationErrorItem: s.validationErrorItem,
  Health: s.health,
  Readiness: s.readiness,
  CreateRunRequest: s.createRunBody,
  BrowserOptions: s.browserOptions,
  AddFilesRequest: s.addFilesBody,
  CreateWorkspaceRequest: s.createWorkspaceBody,
  UpdateWorkspaceRequest: s.updateWorkspaceBody,
  CreateBrowserRequest: s.createBrowserBody,
  CreateLiveViewLinkRequest: s.createLiveViewLinkBody,
  CreateProfileRequest: s.createProfileBody,
  UpdateProfileRequest: s.updateProfileBody,
  ApiKey: s.apiKey,
  ApiKeyCreated: s.apiKeyCreated,
  ApiKeyList: s.apiKeyList,
  CreateApiKeyRequest: s.createApiKeyBody,
  Webhook: w.webhook,
  WebhookWithSecret: w.webhookWithSecret,
  WebhookList: w.webhookList,
  WebhookDelivery: w.webhookDelivery,
  WebhookDeliveryList: w.webhookDeliveryList,
  CreateWebhookRequest: w.createWebhookBody,
  UpdateWebhookRequest: w.updateWebhookBody,
  RotateWebhookSecretRequest: w.rotateWebhookSecretBody,
  RunEventPayload: w.runEventPayload,
  BrowserEventPayload: w.browserEventPayload,
  FileEventPayload: w.fileEventPayload,
  TestEventPayload: w.testEventPayload,
};

const REF_PREFIX = '#/components/schemas/';

/** A copy of `node` in which every named schema below the top is a `$ref` to its component. */
function withRefs(node: unknown, names: Map<unknown, string>, top: unknown = node): unknown {
  if (node !== top && names.has(node)) return { $ref: `${REF_PREFIX}${names.get(node)}` };
  if (Array.isArray(node)) return node.map((x) => withRefs(x, names, top));
  if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, withRefs(v, names, top)]));
  return node;
}

/**
 * `doc` with every `$ref` to `components/schemas` replaced by the schema it names (the document's
 * schemas form no cycle), for tools that compile one operation's schema on its own.
 */
export function dereference<T>(doc: T): T {
  const schemas = ((doc as { components?: { schemas?: Record<string, unknown> } }).components?.schemas ?? {}) as Record<string, unknown>;
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!node || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string' && ref.startsWith(REF_PREFIX)) {
      const target = schemas[ref.slice(REF_PREFIX.length)];
      if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
      return walk(target);
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v)]));
  };
  const { components, ...rest } = doc as Record<string, unknown>;
  return { ...(walk(rest) as object), ...(components ? { components } : {}) } as T;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request',
  401: 'Invalid or missing API key',
  403: 'The API key has the read scope: it cannot change state',
  404: 'Not found',
  409: 'Conflict with the current state',
  413: 'Request body too large',
  415: 'The body is not application/json, or its encoding is not supported',
  422: 'Validation error',
  429: 'Limit reached: a rate limit of the API key or a limit of the project (see Retry-After)',
  500: 'Internal error (carries a request id)',
  501: 'Not implemented yet',
  503: 'A service the route needs is unavailable',
  504: 'A service the route needs did not answer in time',
};

/** What any route can answer: no key, a rate limit, a fault (500), and a downstream service missing, unimplemented or late. */
const EVERY_ROUTE = [401, 429, 500, 501, 503, 504];
/** What reading a JSON body can answer: unreadable (400), too large, not JSON, invalid. */
const BODY = [400, 413, 415, 422];

/** Accepted by every POST (see idempotency.ts). */
const IDEMPOTENCY_KEY_PARAM = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first request with this key (per project, kept 24 h) does the work; a retry with the same key and the same method, path and body gets the first response back (header Idempotent-Replayed: true), waiting for it while the first is still in progress. The same key with another request is a 422.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

function pathParams(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
}

/** Every status `r` can answer besides its success, ascending. */
function errorStatuses(r: RouteDef): number[] {
  const out = new Set([...EVERY_ROUTE, ...(r.errors ?? [])]);
  // A read key may not change state.
  if (r.method !== 'get') out.add(403);
  // Idempotency-Key: still in progress (409), used for another request (422), malformed (400).
  if (r.method === 'post') for (const code of [400, 409, 422]) out.add(code);
  // An unknown agent, an id with a NUL or a path segment that is not valid percent-encoding names nothing.
  if (pathParams(r.path).length) out.add(404);
  if (r.body) for (const code of BODY) out.add(code);
  if (r.query) out.add(422);
  return [...out].sort((a, b) => a - b);
}

function describe(r: RouteDef, code: number): string {
  if (code === 404 && r.path.includes(':agent')) return 'Not found: an unknown agent in the path, or an unknown id';
  if (r.method === 'post' && code === 409) return `${r.errors?.includes(409) ? `${STATUS_TEXT[409]}, or a` : 'A'} request with the same Idempotency-Key still in progress`;
  if (r.method === 'post' && code === 422) return 'Validation error, or the Idempotency-Key was used for another request';
  return STATUS_TEXT[code] ?? 'Error';
}

/** A probe endpoint: no key, 200 or 503 with the same body. */
function probe(operationId: string, summary: string, schema: unknown, ok: string, unavailable: string): Record<string, unknown> {
  const body = { 'application/json': { schema } };
  return { get: { operationId, summary, tags: ['health'], security: [], responses: { '200': { description: ok, content: body }, '503': { description: unavailable, content: body } } } };
}

/**
 * What a webhook endpoint receives (OpenAPI 3.1 `webhooks`): a signed POST per event (Standard
 * Webhooks headers), answered with any 2xx; 410 disables the endpoint, anything else is retried.
 */
function webhookPayloads(): Record<string, unknown> {
  const header = (name: string, description: string) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } });
  const parameters = [
    header('webhook-id', 'The event id (evt_…): the same on every attempt, so a receiver can drop a repeat'),
    header('webhook-timestamp', 'Seconds since the epoch when this attempt was signed'),
    header('webhook-signature', 'v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"> with the secret; space-separated, one per secret during a rotation'),
  ];
  return Object.fromEntries(
    Object.entries(w.WEBHOOK_PAYLOADS).map(([type, p]) => [
      type,
      {
        post: {
          operationId: `webhook_${type.replace('.', '_')}`,
          summary: p.summary,
          tags: ['webhooks'],
          parameters,
          requestBody: { required: true, content: { 'application/json': { schema: p.schema } } },
          responses: {
            '2XX': { description: 'Received: not sent again' },
            '410': { description: 'Gone: the endpoint is disabled' },
            default: { description: 'Retried with exponential backoff and jitter' },
          },
        },
      },
    ]),
  );
}

export function buildOpenApi(routes: RouteDef[], version: string): Record<string, unknown> {
  const names = new Map<unknown, string>(Object.entries(NAMED_SCHEMAS).map(([name, schema]) => [schema, name]));
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const oaPath = `/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`;
    const parameters: unknown[] = pathParams(r.path).map((name) => ({
      name,
      in: 'path',
      required: true,
      schema: s.pathParams[name as keyof typeof s.pathParams] ?? { type: 'string' },
    }));
    for (const [name, schema] of Object.entries(r.query?.properties ?? {})) {
      parameters.push({ name, in: 'query', required: false, schema });
    }
    if (r.method === 'post') parameters.push(IDEMPOTENCY_KEY_PARAM);
    const responses: Record<string, unknown> = {
      [String(r.success.status)]: {
        description: r.success.description ?? 'Success',
        ...(r.success.schema ? { content: { 'application/json': { schema: r.success.schema } } } : {}),
        ...(r.success.contentType ? { content: { [r.success.contentType]: { schema: { type: 'string' } } } } : {}),
      },
    };
    for (const code of errorStatuses(r)) {
      responses[String(code)] = {
        description: describe(r, code),
        content: { 'application/json': { schema: code === 422 ? s.validationErrorResponse : s.errorResponse } },
      };
    }
    paths[oaPath] ??= {};
    paths[oaPath]![r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      tags: [r.tag],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: r.body } } } } : {}),
      responses,
    };
  }
  paths['/healthz'] = probe('health', "Each downstream service's health (no key needed)", s.health, 'All services serving', 'A service is not serving');
  paths['/readyz'] = probe(
    'readiness',
    'Whether this gateway takes new requests; it does not ask the downstream services (no key needed)',
    s.readiness,
    'Listening and not shutting down',
    'Shutting down: send new requests elsewhere',
  );
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Agent Task Service',
      version,
      description: 'Runs tasks in plain language with a browser agent or a code agent; browsers over CDP; files; live view.',
    },
    servers: [{ url: '/' }],
    components: {
      schemas: Object.fromEntries(Object.entries(NAMED_SCHEMAS).map(([name, schema]) => [name, withRefs(schema, names)])),
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-API-Key' } },
    },
    security: [{ apiKey: [] }],
    paths: withRefs(paths, names),
    webhooks: withRefs(webhookPayloads(), names),
  };
}
