/**
 * The public JSON shapes of the resources a webhook event carries (DESIGN §2: camelCase, null for
 * unset), from their proto messages. The gateway answers with these and the services record the
 * same objects in their webhook outboxes, so an event's `data` is what the REST API returns.
 */
import { RunStatus, type Run } from '../../../gen/ats/run/v1/run.js';
import { BrowserStatus, StopReason, type Browser } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { FileKind, type FileInfo } from '../../../gen/ats/filestorage/v1/file_storage.js';
import { agentName, type AgentName } from './agent-name.js';
import { InternalError } from './errors.js';

export const orNull = <T>(v: T | undefined): T | null => (v === undefined || v === '' ? null : v);

export type RunStatusName = 'queued' | 'running' | 'completed' | 'stopped' | 'failed';

export const RUN_STATUS: Record<RunStatusName, RunStatus> = {
  queued: RunStatus.RUN_STATUS_QUEUED,
  running: RunStatus.RUN_STATUS_RUNNING,
  completed: RunStatus.RUN_STATUS_COMPLETED,
  stopped: RunStatus.RUN_STATUS_STOPPED,
  failed: RunStatus.RUN_STATUS_FAILED,
};
const RUN_STATUS_NAME = new Map((Object.entries(RUN_STATUS) as [RunStatusName, RunStatus][]).map(([k, v]) => [v, k]));
export function runStatusName(s: RunStatus): RunStatusName {
  return RUN_STATUS_NAME.get(s) ?? 'queued';
}

/** The public name of a record's agent; a record without one is a bug, not a client error. */
function publicAgent(a: Run['agent']): AgentName {
  const name = agentName(a);
  if (!name) throw new InternalError(`downstream reply with agent ${a}`);
  return name;
}

export interface RunResource {
  id: string;
  agent: AgentName;
  status: RunStatusName;
  sessionId: string;
  browserId: string | null;
  workspaceId: string | null;
  model: string;
  task: string;
  result: string | null;
  output: null;
  error: string | null;
  totalCostUsd: string;
  totalInputTokens: number;
  totalOutputTokens: number;
  missingFileIds: string[];
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
}

export function runResource(r: Run): RunResource {
  return {
    id: r.id,
    agent: publicAgent(r.agent),
    status: runStatusName(r.status),
    sessionId: r.sessionId,
    browserId: orNull(r.browserId),
    workspaceId: orNull(r.workspaceId),
    model: r.model,
    task: r.task,
    result: orNull(r.result),
    output: null,
    error: orNull(r.error),
    totalCostUsd: r.totalCostUsd || '0',
    totalInputTokens: r.totalInputTokens,
    totalOutputTokens: r.totalOutputTokens,
    missingFileIds: r.missingFileIds,
    createdAt: r.createdAt,
    startedAt: orNull(r.startedAt),
    finishedAt: orNull(r.finishedAt),
    updatedAt: r.updatedAt,
  };
}

export interface FileResource {
  id: string;
  name: string;
  kind: 'input' | 'output';
  downloadUrl: string;
  sizeBytes: number;
  contentType: string;
  createdAt: string;
}

export function fileResource(f: FileInfo): FileResource {
  return {
    id: f.id,
    name: f.name,
    kind: f.kind === FileKind.FILE_KIND_OUTPUT ? 'output' : 'input',
    downloadUrl: f.downloadUrl,
    sizeBytes: f.sizeBytes,
    contentType: f.contentType,
    createdAt: f.createdAt,
  };
}

export interface BrowserResource {
  id: string;
  status: 'active' | 'stopped';
  cdpUrl: string | null;
  liveViewUrl: string | null;
  profileId: string | null;
  sessionId: string | null;
  runId: string | null;
  proxyCountryCode: string | null;
  stealth: boolean;
  locale: string | null;
  timezone: string | null;
  allowedDomains: string[];
  blockAds: boolean;
  screenWidth: number;
  screenHeight: number;
  createdAt: string;
  timeoutAt: string | null;
  stoppedAt: string | null;
  stopReason: BrowserStopReason | null;
  recordingUrl: string | null;
}

/** Why a browser stopped, as the API names it, and its value in the contract. */
export const BROWSER_STOP_REASON_CODES = {
  user: StopReason.STOP_REASON_USER,
  run_ended: StopReason.STOP_REASON_RUN_ENDED,
  run_stopped: StopReason.STOP_REASON_RUN_STOPPED,
  session_closed: StopReason.STOP_REASON_SESSION_CLOSED,
  timeout: StopReason.STOP_REASON_TIMEOUT,
  idle: StopReason.STOP_REASON_IDLE,
  shutdown: StopReason.STOP_REASON_SHUTDOWN,
  reclaimed: StopReason.STOP_REASON_RECLAIMED,
  owner_lost: StopReason.STOP_REASON_OWNER_LOST,
  crashed: StopReason.STOP_REASON_CRASHED,
} as const satisfies Record<string, StopReason>;
export type BrowserStopReason = keyof typeof BROWSER_STOP_REASON_CODES;
const STOP_REASON_NAMES = new Map(Object.entries(BROWSER_STOP_REASON_CODES).map(([name, code]) => [code as StopReason, name as BrowserStopReason]));

export function browserResource(b: Browser, recordingUrl: string | null = null): BrowserResource {
  return {
    id: b.id,
    status: b.status === BrowserStatus.BROWSER_STATUS_STOPPED ? 'stopped' : 'active',
    cdpUrl: orNull(b.cdpUrl),
    liveViewUrl: orNull(b.liveViewUrl),
    profileId: orNull(b.profileId),
    sessionId: orNull(b.sessionId),
    runId: orNull(b.runId),
    proxyCountryCode: orNull(b.proxyCountryCode),
    stealth: b.stealth,
    locale: orNull(b.locale),
    timezone: orNull(b.timezone),
    allowedDomains: b.allowedDomains,
    blockAds: b.blockAds,
    screenWidth: b.screenWidth,
    screenHeight: b.screenHeight,
    createdAt: b.createdAt,
    timeoutAt: orNull(b.timeoutAt),
    stoppedAt: orNull(b.stoppedAt),
    stopReason: b.status === BrowserStatus.BROWSER_STATUS_STOPPED ? (STOP_REASON_NAMES.get(b.stopReason) ?? null) : null,
    recordingUrl,
  };
}
