/**
 * The API's types: aliases of the named schemas of /openapi.json, generated into
 * src/generated/openapi.ts (never written by hand), and its query strings.
 */
import type { components, operations } from './generated/openapi.js';

type Schemas = components['schemas'];
/** The query string of an operation. */
type Query<O extends keyof operations> = NonNullable<operations[O]['parameters']['query']>;

export type Agent = Schemas['Agent'];
export type AgentList = Schemas['AgentList'];
export type Model = Schemas['Model'];
export type ModelList = Schemas['ModelList'];
/** An agent's name as the API spells it (`browser-agent`, `browsercode`). */
export type AgentName = Agent['name'];
export type RunCreated = Schemas['RunCreated'];
export type Run = Schemas['Run'];
export type RunStatus = Schemas['RunStatus'];
/** A run's status name (`queued`, `running`, `completed`, `stopped`, `failed`). */
export type RunStatusName = Run['status'];
export type RunList = Schemas['RunList'];
export type Step = Schemas['Step'];
export type StepList = Schemas['StepList'];
export type Event = Schemas['Event'];
export type EventList = Schemas['EventList'];
export type Session = Schemas['Session'];
export type SessionList = Schemas['SessionList'];
export type FileUpload = Schemas['FileUpload'];
export type FileUploadList = Schemas['FileUploadList'];
export type File = Schemas['File'];
export type FileList = Schemas['FileList'];
export type WorkspaceFileList = Schemas['WorkspaceFileList'];
export type Workspace = Schemas['Workspace'];
export type WorkspaceList = Schemas['WorkspaceList'];
export type Browser = Schemas['Browser'];
export type BrowserList = Schemas['BrowserList'];
export type Recording = Schemas['Recording'];
export type LiveViewLink = Schemas['LiveViewLink'];
export type Download = Schemas['Download'];
export type DownloadList = Schemas['DownloadList'];
export type Profile = Schemas['Profile'];
export type ProfileList = Schemas['ProfileList'];
export type ApiKey = Schemas['ApiKey'];
export type ApiKeyCreated = Schemas['ApiKeyCreated'];
export type ApiKeyList = Schemas['ApiKeyList'];
export type Webhook = Schemas['Webhook'];
export type WebhookWithSecret = Schemas['WebhookWithSecret'];
export type WebhookList = Schemas['WebhookList'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookDeliveryList = Schemas['WebhookDeliveryList'];
export type RunEventPayload = Schemas['RunEventPayload'];
export type BrowserEventPayload = Schemas['BrowserEventPayload'];
export type FileEventPayload = Schemas['FileEventPayload'];
export type TestEventPayload = Schemas['TestEventPayload'];
/** The body of an error reply (`{detail}`): the API's `Error` schema. */
export type ErrorBody = Schemas['Error'];
/** The body of a 422 reply: the API's `ValidationError` schema. */
export type ValidationErrorBody = Schemas['ValidationError'];
export type ValidationErrorItem = Schemas['ValidationErrorItem'];
export type Health = Schemas['Health'];
export type Readiness = Schemas['Readiness'];

export type CreateRunRequest = Schemas['CreateRunRequest'];
export type BrowserOptions = Schemas['BrowserOptions'];
export type AddFilesRequest = Schemas['AddFilesRequest'];
export type CreateWorkspaceRequest = Schemas['CreateWorkspaceRequest'];
export type UpdateWorkspaceRequest = Schemas['UpdateWorkspaceRequest'];
export type CreateBrowserRequest = Schemas['CreateBrowserRequest'];
export type CreateLiveViewLinkRequest = Schemas['CreateLiveViewLinkRequest'];
export type CreateProfileRequest = Schemas['CreateProfileRequest'];
export type UpdateProfileRequest = Schemas['UpdateProfileRequest'];
export type CreateApiKeyRequest = Schemas['CreateApiKeyRequest'];
export type CreateWebhookRequest = Schemas['CreateWebhookRequest'];
export type UpdateWebhookRequest = Schemas['UpdateWebhookRequest'];
export type RotateWebhookSecretRequest = Schemas['RotateWebhookSecretRequest'];

export type ListRunsQuery = Query<'listRuns'>;
export type ListBrowsersQuery = Query<'listBrowsers'>;
export type PageQuery = Query<'listProfiles'>;
export type RunFilesQuery = Query<'listRunFiles'>;
