/**
 * The API's types, read off the generated src/generated/openapi.ts (never written by hand), and
 * the camelCase option types derived from its snake_case request bodies and query strings.
 */
import type { operations } from './generated/openapi.js';

type Ok<R> = R extends { 200: { content: { 'application/json': infer B } } }
  ? B
  : R extends { 201: { content: { 'application/json': infer B } } }
    ? B
    : R extends { 202: { content: { 'application/json': infer B } } }
      ? B
      : never;
/** The JSON body of an operation's success reply. */
type Reply<O extends keyof operations> = Ok<operations[O]['responses']>;
/** The JSON body of an operation's request. */
type Body<O extends keyof operations> = operations[O] extends { requestBody: { content: { 'application/json': infer B } } } ? B : never;
/** The query string of an operation. */
type Query<O extends keyof operations> = operations[O]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never;

export type Agent = Reply<'listAgents'>['agents'][number];
export type AgentList = Reply<'listAgents'>;
/** An agent's name as the API spells it (`browser-agent`, `browsercode`). */
export type AgentName = Agent['name'];
export type RunCreated = Reply<'createRun'>;
export type Run = Reply<'getRun'>;
export type RunStatus = Reply<'getRunStatus'>;
/** A run's status name (`queued`, `running`, `completed`, `stopped`, `failed`). */
export type RunStatusName = Run['status'];
export type RunList = Reply<'listRuns'>;
export type Step = Reply<'listSteps'>['steps'][number];
export type StepList = Reply<'listSteps'>;
export type Event = Reply<'listEvents'>['events'][number];
export type EventList = Reply<'listEvents'>;
export type Session = Reply<'getSession'>;
export type SessionList = Reply<'listSessions'>;
export type FileUpload = Reply<'addFiles'>['items'][number];
export type FileUploadList = Reply<'addFiles'>;
export type File = Reply<'listRunFiles'>['items'][number];
export type FileList = Reply<'listRunFiles'>;
export type WorkspaceFileList = Reply<'listWorkspaceFiles'>;
export type Workspace = Reply<'getWorkspace'>;
export type WorkspaceList = Reply<'listWorkspaces'>;
export type Browser = Reply<'getBrowser'>;
export type BrowserList = Reply<'listBrowsers'>;
export type Recording = Reply<'getRecording'>;
export type LiveViewLink = Reply<'createLiveViewLink'>;
export type Download = Reply<'listBrowserDownloads'>['items'][number];
export type DownloadList = Reply<'listBrowserDownloads'>;
export type Profile = Reply<'getProfile'>;
export type ProfileList = Reply<'listProfiles'>;
type ErrorReplies = operations['createRun']['responses'];
/** The body of an error reply (`{detail}`); the API's `Error` schema. */
export type ErrorBody = ErrorReplies[404]['content']['application/json'];
/** The body of a 422 reply; the API's `ValidationError` schema. */
export type ValidationErrorBody = ErrorReplies[422]['content']['application/json'];
export type ValidationErrorItem = ValidationErrorBody['detail'][number];

export type CreateRunRequest = Body<'createRun'>;
export type BrowserOptions = NonNullable<CreateRunRequest['browser']>;
export type AddFilesRequest = Body<'addFiles'>;
export type CreateWorkspaceRequest = Body<'createWorkspace'>;
export type UpdateWorkspaceRequest = Body<'updateWorkspace'>;
export type CreateBrowserRequest = Body<'createBrowser'>;
export type CreateLiveViewLinkRequest = Body<'createLiveViewLink'>;
export type CreateProfileRequest = Body<'createProfile'>;
export type UpdateProfileRequest = Body<'updateProfile'>;

export type ListRunsQuery = Query<'listRuns'>;
export type ListBrowsersQuery = Query<'listBrowsers'>;
export type PageQuery = Query<'listProfiles'>;
export type RunFilesQuery = Query<'listRunFiles'>;
