/**
 * JSON Schemas of the public API: the gateway validates requests with them and the OpenAPI
 * document is built from the same objects (one source).
 */
import { AGENT_NAMES, type AgentName } from '../../services/common/src/agent-name.js';

/** A JSON Schema (draft 2020-12 subset understood by ajv and OpenAPI 3.1). */
export type JsonSchema = { [key: string]: unknown; type?: string | string[]; properties?: Record<string, JsonSchema> };

const str = (extra: JsonSchema = {}): JsonSchema => ({ type: 'string', ...extra });
const int = (extra: JsonSchema = {}): JsonSchema => ({ type: 'integer', ...extra });
const nullable = (s: JsonSchema): JsonSchema => ({ ...s, type: [s.type as string, 'null'] });
const obj = (properties: Record<string, JsonSchema>, required: string[] = [], extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
  ...extra,
});
const list = (items: JsonSchema, extra: JsonSchema = {}): JsonSchema => ({ type: 'array', items, ...extra });
const ts = str({ format: 'date-time', description: 'ISO-8601 UTC' });
const id = (prefix: string) => str({ minLength: 1, maxLength: 100, description: `Id (prefix ${prefix}_)` });

export { AGENT_NAMES, type AgentName };
export const RUN_STATUSES = ['queued', 'running', 'completed', 'stopped', 'failed'] as const;

/** A file name: one path segment, no separators, NUL, `.` or `..`. */
export const fileName = str({
  minLength: 1,
  maxLength: 255,
  pattern: '^(?!\\.{1,2}$)[^/\\\\\\u0000]+$',
  'x-error': 'a file name is a single path segment without /, \\, NUL, . or ..',
});

// ---------- requests ----------

export const browserOptions = obj(
  {
    proxy_country_code: str({ pattern: '^[a-z]{2}$', 'x-error': 'proxy_country_code must be an ISO 3166-1 alpha-2 code in lower case', description: 'ISO 3166-1 alpha-2, lower case' }),
    screen_width: int({ minimum: 320, maximum: 3840 }),
    screen_height: int({ minimum: 240, maximum: 2160 }),
    profile_id: id('prf'),
  },
  [],
  { dependentRequired: { screen_width: ['screen_height'], screen_height: ['screen_width'] } },
);

export const createRunBody = obj(
  {
    task: str({ minLength: 1, maxLength: 50000, description: 'What to do, in plain language' }),
    model: str({ minLength: 1, maxLength: 200, description: 'LLM to use; the service default when omitted' }),
    browser: browserOptions,
    session_id: id('ses'),
    attached_file_ids: list(id('file'), { maxItems: 100 }),
    workspace_id: id('wsp'),
  },
  ['task'],
);

export const addFilesBody = obj({ files: list(obj({ name: fileName }, ['name']), { minItems: 1, maxItems: 20 }) }, ['files']);

export const createWorkspaceBody = obj({ name: str({ minLength: 1, maxLength: 200 }) }, ['name']);
export const updateWorkspaceBody = obj({ name: str({ minLength: 1, maxLength: 200 }) }, ['name']);

export const createBrowserBody = obj(
  {
    browser_profile_id: id('prf'),
    proxy_country_code: browserOptions.properties!.proxy_country_code!,
    screen_width: browserOptions.properties!.screen_width!,
    screen_height: browserOptions.properties!.screen_height!,
    timeout_minutes: int({ minimum: 1, maximum: 240, description: 'Hard limit; default 60' }),
  },
  [],
  { dependentRequired: { screen_width: ['screen_height'], screen_height: ['screen_width'] } },
);

export const LIVE_VIEW_LINK_SECONDS = { min: 60, max: 7 * 86400, default: 3600 } as const;
export const createLiveViewLinkBody = obj(
  {
    mode: str({ enum: ['view', 'interactive'], description: '`view`: watch only (input is refused); `interactive`: mouse, wheel and keyboard reach the browser' }),
    expires_in_seconds: int({
      minimum: LIVE_VIEW_LINK_SECONDS.min,
      maximum: LIVE_VIEW_LINK_SECONDS.max,
      description: `Lifetime of the link (${LIVE_VIEW_LINK_SECONDS.min} s to 7 days); default ${LIVE_VIEW_LINK_SECONDS.default}`,
    }),
  },
  ['mode'],
);

export const createProfileBody = obj({ name: str({ minLength: 1, maxLength: 200 }), user_id: str({ minLength: 1, maxLength: 200 }) }, ['name']);
export const updateProfileBody = obj({ name: str({ minLength: 1, maxLength: 200 }) }, ['name']);

export const emptyBody = obj({});

// ---------- query strings ----------

const paging = { limit: int({ minimum: 1, maximum: 200, default: 50 }), cursor: str({ maxLength: 500 }) };
export const pageQuery = obj(paging);
export const listRunsQuery = obj({ ...paging, session_id: id('ses'), status: str({ enum: [...RUN_STATUSES] }) });
export const listBrowsersQuery = obj({ ...paging, status: str({ enum: ['active', 'stopped'] }), session_id: id('ses') });
export const stepsQuery = obj({ after: int({ minimum: 0, maximum: 2147483647 }), limit: int({ minimum: 1, maximum: 200, default: 50 }) });
export const eventsQuery = stepsQuery;
export const filesQuery = obj({ kind: str({ enum: ['input', 'output'] }) });

// ---------- responses (documentation) ----------

export const errorResponse = obj({ detail: str() }, ['detail']);
export const validationErrorResponse = obj(
  { detail: list(obj({ type: str(), loc: list({ type: ['string', 'integer'] }), msg: str(), input: {}, ctx: { type: 'object' } }, ['type', 'loc', 'msg'])) },
  ['detail'],
);

export const agentInfo = obj(
  {
    name: str({ enum: [...AGENT_NAMES] }),
    capabilities: list(str()),
    session: obj({ kind: str({ enum: ['disposable', 'durable'] }) }, ['kind']),
    watch: str({ enum: ['steps', 'events'] }),
    run: str({ description: 'How to start a run' }),
    bestFor: list(str()),
    notFor: list(str()),
    exampleTasks: list(str()),
  },
  ['name', 'capabilities', 'session', 'watch', 'run', 'bestFor', 'notFor', 'exampleTasks'],
);
export const agentsResponse = obj({ agents: list(agentInfo) }, ['agents']);

export const runCreated = obj(
  {
    id: str(),
    status: str({ enum: ['queued'] }),
    agent: str({ enum: [...AGENT_NAMES] }),
    sessionId: str(),
    workspaceId: nullable(str()),
    stepsUrl: str(),
    eventsUrl: str(),
    missingFileIds: list(str()),
  },
  ['id', 'status', 'sessionId', 'stepsUrl', 'missingFileIds'],
);

export const run = obj({
  id: str(),
  agent: str({ enum: [...AGENT_NAMES] }),
  status: str({ enum: [...RUN_STATUSES] }),
  sessionId: str(),
  browserId: nullable(str()),
  workspaceId: nullable(str()),
  model: str(),
  task: str(),
  result: nullable(str()),
  output: { type: 'null', description: 'Reserved for native structured output; always null' },
  error: nullable(str()),
  totalCostUsd: str({ description: 'Decimal string' }),
  totalInputTokens: int(),
  totalOutputTokens: int(),
  missingFileIds: list(str()),
  createdAt: ts,
  startedAt: nullable(ts),
  finishedAt: nullable(ts),
  updatedAt: ts,
});
export const runStatus = obj({ status: str({ enum: [...RUN_STATUSES] }), result: nullable(str()), output: { type: 'null' }, totalCostUsd: str() });
const pageOf = (item: JsonSchema) => obj({ items: list(item), nextCursor: nullable(str()), hasMore: { type: 'boolean' } }, ['items', 'hasMore']);
export const runList = pageOf(run);

export const step = obj({ number: int(), url: str(), action: str(), thought: nullable(str()), screenshotUrl: nullable(str()), ts, durationMs: int() });
export const stepList = obj({ steps: list(step), nextAfter: int(), hasMore: { type: 'boolean' } });
export const event = obj({ id: int(), runId: str(), ts, type: str(), data: { type: 'object' } });
export const eventList = obj({ events: list(event), nextAfter: int(), hasMore: { type: 'boolean' } });

export const session = obj({
  id: str(),
  agent: str({ enum: [...AGENT_NAMES] }),
  status: str({ enum: ['open', 'closed'] }),
  busy: { type: 'boolean' },
  latestRunId: nullable(str()),
  browserId: nullable(str()),
  workspaceId: nullable(str()),
  closedReason: nullable(str({ description: 'Why the session closed (e.g. "run stopped", "browser stopped", "browser reclaimed for a newer run"); null while open' })),
  createdAt: ts,
  updatedAt: ts,
});
export const sessionList = pageOf(session);

export const uploadItems = obj({ items: list(obj({ id: str(), name: str(), upload_url: str({ description: 'Presigned PUT URL' }) })) }, ['items']);
export const fileItem = obj({ id: str(), name: str(), kind: str({ enum: ['input', 'output'] }), downloadUrl: str(), sizeBytes: int(), contentType: str(), createdAt: ts });
export const fileList = obj({ items: list(fileItem) }, ['items']);

export const workspace = obj({ id: str(), name: str(), createdAt: ts, updatedAt: ts });
export const workspaceList = pageOf(workspace);

export const browser = obj({
  id: str(),
  status: str({ enum: ['active', 'stopped'] }),
  cdpUrl: nullable(str()),
  liveViewUrl: nullable(str()),
  profileId: nullable(str()),
  sessionId: nullable(str()),
  runId: nullable(str()),
  proxyCountryCode: nullable(str()),
  screenWidth: int(),
  screenHeight: int(),
  createdAt: ts,
  timeoutAt: nullable(ts),
  stoppedAt: nullable(ts),
  recordingUrl: nullable(str()),
});
export const browserList = pageOf(browser);
export const recording = obj({ url: str(), expiresAt: ts }, ['url', 'expiresAt']);
export const liveViewLink = obj({ url: str({ description: 'The live view page with an opaque token; open or embed it' }), expiresAt: ts }, ['url', 'expiresAt']);
export const downloadList = obj({ items: list(obj({ name: str(), sizeBytes: int(), lastModified: ts, downloadUrl: str() })) }, ['items']);

export const profile = obj({ id: str(), name: str(), userId: nullable(str()), lastUsedAt: nullable(ts), cookieDomains: list(str()), createdAt: ts, updatedAt: ts });
export const profileList = pageOf(profile);

export const health = obj({ status: str({ enum: ['ok', 'degraded'] }), services: { type: 'object', additionalProperties: str() } }, ['status', 'services']);
