/** The TypeScript SDK of the Agent Task Service (Node ≥ 20 and browsers). */
export { AgentTaskService } from './client.js';
export type { ClientOptions, Fetch, RequestOptions } from './core.js';
export {
  AgentTaskServiceError,
  APIError,
  APIStatusError,
  BadRequestError,
  AuthenticationError,
  NotFoundError,
  ConflictError,
  UnprocessableEntityError,
  RateLimitError,
  InternalServerError,
  APIConnectionError,
  APITimeoutError,
  RunTimeoutError,
} from './errors.js';
export { Page, PageIterator } from './pagination.js';
export type { FileContent, FileInput } from './uploads.js';
export { Agents } from './resources/agents.js';
export { Models } from './resources/models.js';
export { Runs, TERMINAL_EVENT_TYPES, TERMINAL_STATUSES } from './resources/runs.js';
export type { AfterOptions, CreateRunOptions, ListRunsOptions, RunFilesOptions, StreamOptions, WaitOptions } from './resources/runs.js';
export { Sessions } from './resources/sessions.js';
export type { ListSessionsOptions } from './resources/sessions.js';
export { Files } from './resources/files.js';
export type { UploadOptions } from './resources/files.js';
export { Workspaces } from './resources/workspaces.js';
export type { PageOptions } from './resources/workspaces.js';
export { Browsers, BrowserHandle } from './resources/browsers.js';
export type { CreateBrowserOptions, ListBrowsersOptions, LiveViewLinkOptions } from './resources/browsers.js';
export { Profiles } from './resources/profiles.js';
export { ApiKeys } from './resources/api-keys.js';
export { Webhooks } from './resources/webhooks.js';
export { FileHandle } from './resources/shared.js';
export type { AgentOption, DownloadOptions, Downloadable, UploadedFile } from './resources/shared.js';
export type * from './models.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { VerifyWebhookOptions } from './webhooks.js';
