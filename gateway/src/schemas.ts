/**
 * JSON Schemas of the public API: the gateway validates requests with them and the OpenAPI
 * document is built from the same objects (one source).
 */
import { AGENT_NAMES, type AgentName } from '../../services/common/src/agent-name.js';
import { API_KEY_SCOPES } from './api-key.repository.js';

import { bool, int, list, nullable, obj, reply, str, type FromSchema, type JsonSchema } from './json-schema.js';

export type { FromSchema, JsonSchema } from './json-schema.js';

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

/** What a browser presents to pages (issue 24); the pool checks the timezone against the IANA names too. */
const identityOptions = {
  stealth: bool({ description: "Present a person's browser's fingerprint (no automation tells, a varied CPU count, stable per profile); default true. false: headless Chromium as it is" }),
  locale: str({ minLength: 2, maxLength: 35, pattern: '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$', 'x-error': 'locale must be a BCP 47 language tag such as en-US', description: "BCP 47 language tag for navigator.language, Intl and Accept-Language; default: the proxy country's, else en-US" }),
  allowed_domains: list(
    str({ minLength: 1, maxLength: 255, pattern: '^(\\*\\.)?[A-Za-z0-9.-]+$', 'x-error': 'allowed_domains are host patterns such as example.com or *.example.com' }),
    { maxItems: 100, description: 'Hosts the browser may reach: example.com (that host) or *.example.com (it and every subdomain); anything else is refused at the network (navigation, tabs, redirects, form posts). Empty or omitted: any' },
  ),
  timezone: str({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_+\\-]+(/[A-Za-z0-9_+\\-]+)*$', 'x-error': 'timezone must be an IANA time zone name such as Europe/Berlin', description: "IANA time zone for Intl and Date; default: the proxy country's, else UTC" }),
};

export const browserOptions = obj(
  {
    proxy_country_code: str({ pattern: '^[a-z]{2}$', 'x-error': 'proxy_country_code must be an ISO 3166-1 alpha-2 code in lower case', description: 'ISO 3166-1 alpha-2, lower case' }),
    screen_width: int({ minimum: 320, maximum: 3840 }),
    screen_height: int({ minimum: 240, maximum: 2160 }),
    profile_id: id('prf'),
    ...identityOptions,
    block_ads: bool({ description: "Block ads and trackers (EasyList and EasyPrivacy): their requests never leave the browser and the elements the lists hide are hidden; default true for a run's browser" }),
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
    proxy_country_code: browserOptions.properties.proxy_country_code,
    screen_width: browserOptions.properties.screen_width,
    screen_height: browserOptions.properties.screen_height,
    timeout_minutes: int({ minimum: 1, maximum: 240, description: 'Hard limit; default 60' }),
    ...identityOptions,
    block_ads: bool({ description: 'Block ads and trackers (EasyList and EasyPrivacy): their requests never leave the browser and the elements the lists hide are hidden; default false' }),
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

export const createApiKeyBody = obj(
  {
    name: str({ minLength: 1, maxLength: 200, description: 'What the key is for (shown in the list)' }),
    scope: str({ enum: API_KEY_SCOPES, description: '`full` (default): everything the project may do; `read`: GET only, anything that changes state is a 403' }),
  },
  ['name'],
);

export const emptyBody = obj({});

// ---------- query strings ----------

const paging = { limit: int({ minimum: 1, maximum: 200, default: 50 }), cursor: str({ maxLength: 2000 }) };
export const pageQuery = obj(paging);
export const listRunsQuery = obj({ ...paging, session_id: id('ses'), status: str({ enum: RUN_STATUSES }) });
export const listBrowsersQuery = obj({ ...paging, status: str({ enum: ['active', 'stopped'] }), session_id: id('ses') });
export const stepsQuery = obj({ after: int({ minimum: 0, maximum: 2147483647 }), limit: int({ minimum: 1, maximum: 200, default: 50 }) });
export const eventsQuery = stepsQuery;
export const filesQuery = obj({ ...paging, kind: str({ enum: ['input', 'output'] }) });

// ---------- path parameters ----------

/** The path parameters of every route; a route's `params` type is read from here by name. */
export const pathParams = {
  agent: str({ enum: AGENT_NAMES }),
  runId: str({ description: 'Run id (prefix run_)' }),
  sessionId: str({ description: 'Session id (prefix ses_)' }),
  browserId: str({ description: 'Browser id (prefix brw_)' }),
  profileId: str({ description: 'Browser profile id (prefix prf_)' }),
  workspaceId: str({ description: 'Workspace id (prefix wsp_)' }),
  apiKeyId: str({ description: 'API key id (prefix key_)' }),
} as const;

// ---------- responses ----------
// Every reply object is a `reply`: each field is required, and a field that may be empty is
// `nullable` (present with null), so a client generated from /openapi.json needs no `?.`.

export const errorResponse = reply({ detail: str() });
export const validationErrorItem = obj({ type: str(), loc: list({ type: ['string', 'integer'] }), msg: str(), input: {}, ctx: { type: 'object' } }, ['type', 'loc', 'msg']);
export const validationErrorResponse = reply({ detail: list(validationErrorItem) });

export const agentInfo = reply({
  name: str({ enum: AGENT_NAMES }),
  capabilities: list(str()),
  session: reply({ kind: str({ enum: ['disposable', 'durable'] }) }),
  watch: str({ enum: ['steps', 'events'] }),
  run: str({ description: 'How to start a run' }),
  bestFor: list(str()),
  notFor: list(str()),
  exampleTasks: list(str()),
});
export const agentsResponse = reply({ agents: list(agentInfo) });

export const MODEL_PROVIDERS = ['builtin', 'openai-compatible', 'anthropic'] as const;
export const modelInfo = reply({
  name: str({ description: 'The name a run gives as `model`' }),
  provider: str({ enum: MODEL_PROVIDERS }),
  vision: bool({ description: 'Each step sends it a screenshot of the page (it reads images)' }),
  default: bool({ description: 'The model of a run that names none' }),
});
export const modelList = reply({
  models: list(modelInfo),
  default: str({ description: 'The model of a run that names none' }),
  otherNames: nullable(str({ description: 'Which names beyond the list a run may also give (e.g. "any model of the OpenAI-compatible endpoint"); null when the list is all' })),
});

export const runCreated = reply({
  id: str(),
  status: str({ enum: ['queued'] }),
  agent: str({ enum: AGENT_NAMES }),
  sessionId: str(),
  workspaceId: nullable(str()),
  stepsUrl: str(),
  eventsUrl: str(),
  missingFileIds: list(str()),
});

export const run = reply({
  id: str(),
  agent: str({ enum: AGENT_NAMES }),
  status: str({ enum: RUN_STATUSES }),
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
export const runStatus = reply({ status: str({ enum: RUN_STATUSES }), result: nullable(str()), output: { type: 'null' }, totalCostUsd: str() });
const pageOf = <const T extends JsonSchema>(item: T) => reply({ items: list(item), nextCursor: nullable(str()), hasMore: bool() });
export const runList = pageOf(run);

export const step = reply({ number: int(), url: nullable(str()), action: str(), thought: nullable(str()), screenshotUrl: nullable(str()), ts, durationMs: int() });
export const stepList = reply({ steps: list(step), nextAfter: int(), hasMore: bool() });
export const event = reply({ id: int(), runId: str(), ts, type: str(), data: { type: 'object' } });
export const eventList = reply({ events: list(event), nextAfter: int(), hasMore: bool() });

export const session = reply({
  id: str(),
  agent: str({ enum: AGENT_NAMES }),
  status: str({ enum: ['open', 'closed'] }),
  busy: bool(),
  latestRunId: nullable(str()),
  browserId: nullable(str()),
  workspaceId: nullable(str()),
  closedReason: nullable(str({ description: 'Why the session closed (e.g. "run stopped", "browser stopped", "browser reclaimed for a newer run"); null while open' })),
  createdAt: ts,
  updatedAt: ts,
});
export const sessionList = pageOf(session);

export const fileUpload = reply({ id: str(), name: str(), upload_url: str({ description: 'Presigned PUT URL' }) });
export const uploadItems = reply({ items: list(fileUpload) });
export const fileItem = reply({ id: str(), name: str(), kind: str({ enum: ['input', 'output'] }), downloadUrl: str(), sizeBytes: int(), contentType: str(), createdAt: ts });
export const fileList = pageOf(fileItem);
export const workspaceFileList = pageOf(fileItem);

export const workspace = reply({ id: str(), name: str(), createdAt: ts, updatedAt: ts });
export const workspaceList = pageOf(workspace);

export const browser = reply({
  id: str(),
  status: str({ enum: ['active', 'stopped'] }),
  cdpUrl: nullable(
    str({
      description:
        'CDP WebSocket URL while active (null once stopped). The browser outlives a restart of the pool process running it: meanwhile reads of it answer 503 (try again) and this URL refuses connections; once the pool is back the same URL works again, tabs, pages and cookies kept',
    }),
  ),
  liveViewUrl: nullable(str()),
  profileId: nullable(str()),
  sessionId: nullable(str()),
  runId: nullable(str()),
  proxyCountryCode: nullable(str()),
  stealth: bool({ description: 'Created with stealth (a person\'s browser\'s fingerprint)' }),
  locale: nullable(str({ description: 'BCP 47 locale it presents' })),
  timezone: nullable(str({ description: 'IANA time zone it presents' })),
  allowedDomains: list(str(), { description: 'Host patterns its network may reach; empty: any' }),
  blockAds: bool({ description: 'Blocks ads and trackers (EasyList and EasyPrivacy)' }),
  screenWidth: int(),
  screenHeight: int(),
  createdAt: ts,
  timeoutAt: nullable(ts),
  stoppedAt: nullable(ts),
  // The values are listed in the description: an `enum` next to the null type would refuse the null.
  stopReason: nullable(
    str({
      description:
        'Why it stopped; null while active. One of: user (a stop call), run_ended, run_stopped, session_closed, timeout, idle, shutdown (the service stopped), reclaimed (an idle session browser gave its slot to a newer one), owner_lost (the pool replica running it died), crashed (Chromium exited on its own)',
    }),
  ),
  recordingUrl: nullable(str()),
});
export const browserList = pageOf(browser);
export const recording = reply({ url: str(), expiresAt: ts });
export const liveViewLink = reply({ url: str({ description: 'The live view page with an opaque token; open or embed it' }), expiresAt: ts });
export const download = reply({ name: str(), sizeBytes: int(), lastModified: ts, downloadUrl: str() });
export const downloadList = reply({ items: list(download) });

export const profile = reply({ id: str(), name: str(), userId: nullable(str()), lastUsedAt: nullable(ts), cookieDomains: list(str()), createdAt: ts, updatedAt: ts });
export const profileList = pageOf(profile);

const apiKeyFields = {
  id: str(),
  name: str(),
  prefix: str({ description: 'The first characters of the key, to recognise it' }),
  scope: str({ enum: API_KEY_SCOPES }),
  createdAt: ts,
  lastUsedAt: nullable(ts),
};
export const apiKey = reply(apiKeyFields);
export const apiKeyCreated = reply({ ...apiKeyFields, key: str({ description: 'The key itself, shown only in this reply: store it now' }) });
export const apiKeyList = reply({ items: list(apiKey) });

export const health = obj({ status: str({ enum: ['ok', 'degraded'] }), services: { type: 'object', additionalProperties: str() } }, ['status', 'services']);
export const readiness = obj({ status: str({ enum: ['ready', 'draining'] }) }, ['status']);

// ---------- the types the presenters build (read off the schemas above) ----------

export type RunStatusName = (typeof RUN_STATUSES)[number];
export type AgentInfoReply = FromSchema<typeof agentInfo>;
export type ModelListReply = FromSchema<typeof modelList>;
export type RunCreatedReply = FromSchema<typeof runCreated>;
export type RunReply = FromSchema<typeof run>;
export type RunStatusReply = FromSchema<typeof runStatus>;
export type StepReply = FromSchema<typeof step>;
export type EventReply = FromSchema<typeof event>;
export type SessionReply = FromSchema<typeof session>;
export type UploadItemReply = FromSchema<typeof fileUpload>;
export type FileReply = FromSchema<typeof fileItem>;
export type WorkspaceReply = FromSchema<typeof workspace>;
export type BrowserReply = FromSchema<typeof browser>;
export type DownloadReply = FromSchema<typeof download>;
export type ProfileReply = FromSchema<typeof profile>;
export type HealthReply = FromSchema<typeof health>;
export type ApiKeyReply = FromSchema<typeof apiKey>;
export type ReadinessReply = FromSchema<typeof readiness>;
