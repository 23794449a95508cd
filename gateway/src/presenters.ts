/** proto messages → the public JSON shapes of DESIGN §2 (camelCase, null for unset). */
import type { RunEvent } from '../../gen/ats/common/v1/common.js';
import { SessionStatus, SessionKind, WatchVerb, Capability, type AgentInfo, type ListModelsResponse, type Run, type Session, type Step } from '../../gen/ats/run/v1/run.js';
import { type Browser, type Download, type Profile } from '../../gen/ats/browserpool/v1/browser_pool.js';
import { type FileInfo, type UploadItem, type Workspace } from '../../gen/ats/filestorage/v1/file_storage.js';
import { agentName, isAgentName, type Agent, type AgentName } from '../../services/common/src/agent-name.js';
import { InternalError } from '../../services/common/src/errors.js';
import { browserResource, fileResource, orNull, runResource, runStatusName } from '../../services/common/src/resources.js';
export { RUN_STATUS, runStatusName } from '../../services/common/src/resources.js';
import {
  MODEL_PROVIDERS,
  type AgentInfoReply,
  type ModelListReply,
  type BrowserReply,
  type DownloadReply,
  type EventReply,
  type FileReply,
  type ProfileReply,
  type RunCreatedReply,
  type RunReply,
  type RunStatusReply,
  type SessionReply,
  type StepReply,
  type UploadItemReply,
  type WorkspaceReply,
} from './schemas.js';


/** A downstream reply whose required message is missing is a bug, not a client error. */
export function required<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new InternalError(`downstream reply without ${what}`);
  return v;
}

/** The public name of a downstream record's agent; a record without one is a bug, not a client error. */
function publicAgent(a: Agent): AgentName {
  const name = agentName(a);
  if (!name) throw new InternalError(`downstream reply with agent ${a}`);
  return name;
}

function knownAgentName(name: string): AgentName {
  if (!isAgentName(name)) throw new InternalError(`downstream reply with agent ${name}`);
  return name;
}

const CAPABILITY_NAME: Partial<Record<Capability, string>> = {
  [Capability.CAPABILITY_BROWSER]: 'browser',
  [Capability.CAPABILITY_CODE]: 'code',
  [Capability.CAPABILITY_TERMINAL]: 'terminal',
  [Capability.CAPABILITY_FILES]: 'files',
};

export function presentAgent(a: AgentInfo): AgentInfoReply {
  return {
    name: knownAgentName(a.name),
    capabilities: a.capabilities.map((c) => CAPABILITY_NAME[c]).filter((c) => c !== undefined),
    session: { kind: a.sessionKind === SessionKind.SESSION_KIND_DURABLE ? 'durable' : 'disposable' },
    watch: a.watch === WatchVerb.WATCH_VERB_EVENTS ? 'events' : 'steps',
    run: a.run,
    bestFor: a.bestFor,
    notFor: a.notFor,
    exampleTasks: a.exampleTasks,
  };
}

export function presentModels(m: ListModelsResponse): ModelListReply {
  type Provider = ModelListReply['models'][number]['provider'];
  const provider = (p: string): Provider => ((MODEL_PROVIDERS as readonly string[]).includes(p) ? (p as Provider) : 'openai-compatible');
  return {
    models: m.models.map((x) => ({ name: x.name, provider: provider(x.provider), vision: x.vision, default: x.name === m.defaultModel })),
    default: m.defaultModel,
    otherNames: orNull(m.otherNames),
  };
}

export function presentRun(r: Run): RunReply {
  return runResource(r);
}

export function presentRunCreated(r: Run, agent: AgentName): RunCreatedReply {
  const base = `/api/v1/agents/${agent}/runs/${r.id}`;
  return {
    id: r.id,
    // The state the create made, even when a worker has picked the run up before this reply.
    status: 'queued',
    agent,
    sessionId: r.sessionId,
    workspaceId: orNull(r.workspaceId),
    stepsUrl: `${base}/steps`,
    eventsUrl: `${base}/events`,
    missingFileIds: r.missingFileIds,
  };
}

export function presentRunStatus(r: Run): RunStatusReply {
  return { status: runStatusName(r.status), result: orNull(r.result), output: null, totalCostUsd: r.totalCostUsd || '0' };
}

export function presentStep(s: Step): StepReply {
  return { number: s.number, url: orNull(s.url), action: s.action, thought: orNull(s.thought), screenshotUrl: orNull(s.screenshotUrl), ts: s.ts, durationMs: s.durationMs };
}

export function presentEvent(e: RunEvent): EventReply {
  let data: EventReply['data'] = {};
  try {
    const parsed: unknown = e.dataJson ? JSON.parse(e.dataJson) : {};
    // `data` is documented as an object; anything else is passed on as text.
    data = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as EventReply['data']) : { raw: e.dataJson };
  } catch {
    data = { raw: e.dataJson };
  }
  return { id: e.id, runId: e.runId, ts: e.ts, type: e.type, data };
}

export function presentSession(s: Session): SessionReply {
  return {
    id: s.id,
    agent: publicAgent(s.agent),
    status: s.status === SessionStatus.SESSION_STATUS_CLOSED ? 'closed' : 'open',
    busy: s.busy,
    latestRunId: orNull(s.latestRunId),
    browserId: orNull(s.browserId),
    workspaceId: orNull(s.workspaceId),
    closedReason: orNull(s.closedReason),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

export function presentUploadItem(u: UploadItem): UploadItemReply {
  return { id: u.id, name: u.name, upload_url: u.uploadUrl };
}

export function presentFile(f: FileInfo): FileReply {
  return fileResource(f);
}

export function presentWorkspace(w: Workspace): WorkspaceReply {
  return { id: w.id, name: w.name, createdAt: w.createdAt, updatedAt: w.updatedAt };
}

export function presentBrowser(b: Browser, recordingUrl: string | null = null): BrowserReply {
  return browserResource(b, recordingUrl);
}

export function presentDownload(d: Download): DownloadReply {
  return { name: d.name, sizeBytes: d.sizeBytes, lastModified: d.lastModified, downloadUrl: d.downloadUrl };
}

export function presentProfile(p: Profile): ProfileReply {
  return {
    id: p.id,
    name: p.name,
    userId: orNull(p.userId),
    lastUsedAt: orNull(p.lastUsedAt),
    cookieDomains: p.cookieDomains,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
  };
}

/** A page of a list: `{items, nextCursor, hasMore}`. */
export function page<T, U>(r: { items: T[]; nextCursor: string; hasMore: boolean }, present: (t: T) => U) {
  return { items: r.items.map(present), nextCursor: orNull(r.nextCursor), hasMore: r.hasMore };
}
