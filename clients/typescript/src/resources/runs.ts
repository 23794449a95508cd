/** Runs: start one, read it, stop it, wait for its end, list its steps and events, stream its events, fetch its files. */
import type { CamelKeys } from '../casing.js';
import { toSnake } from '../casing.js';
import { backoffMs, sleep, type Core, type RequestOptions } from '../core.js';
import { APIConnectionError, APIError, RunTimeoutError } from '../errors.js';
import type { CreateRunRequest, Event, EventList, FileList, ListRunsQuery, Run, RunCreated, RunFilesQuery, RunList, RunStatus, RunStatusName, Step, StepList } from '../models.js';
import { PageIterator } from '../pagination.js';
import { parseSse } from '../sse.js';
import type { FileInput } from '../uploads.js';
import { agentPath, FileHandle, requestOptions, seg, uploadFiles, type AgentOption } from './shared.js';

/** The statuses a run ends in. */
export const TERMINAL_STATUSES: readonly RunStatusName[] = ['completed', 'stopped', 'failed'];
/** The event types that end a run's event stream. */
export const TERMINAL_EVENT_TYPES: readonly string[] = ['run.completed', 'run.failed', 'run.stopped'];

/** `runs.create`: the API's request in camelCase, the agent, and files to upload and attach. */
export type CreateRunOptions = CamelKeys<CreateRunRequest> &
  AgentOption &
  RequestOptions & {
    /** Files to upload first and attach to the run (added to `attachedFileIds`): paths in Node, `File`s, or `{name, content}`. */
    files?: FileInput[];
    /**
     * An `Idempotency-Key` (e.g. a UUID kept with your order), to make your own retries of the
     * create safe too. Without it the SDK sends one of its own, the same on each of its retries
     * (after a connection error, a timeout or a 503), so the API makes one run however often it is sent.
     */
    idempotencyKey?: string;
  };

/** `runs.list`: filters and paging. */
export type ListRunsOptions = CamelKeys<ListRunsQuery> & AgentOption & RequestOptions;

/** `runs.steps` / `runs.events`: where to start (after this step number or event id) and the page size. */
export interface AfterOptions extends AgentOption, RequestOptions {
  /** Start after this step number / event id (default 0: from the start). */
  after?: number;
  /** Items per page (1-200, default 50). */
  limit?: number;
}

/** `runs.stream`: where to start and when to give up on a dead connection. */
export interface StreamOptions extends AgentOption {
  /** Start after this event id (default 0: from the first event). */
  after?: number;
  /** Stops the stream. */
  signal?: AbortSignal;
  /** Reconnections in a row without a new event before giving up (default: the client's maxRetries). */
  maxRetries?: number;
  /** A connection silent this long (ms) is taken as dead and resumed (default 45000; the server sends a keep-alive every 15 s). */
  idleTimeoutMs?: number;
}

/** `runs.wait`: how long to wait and how often to ask. */
export interface WaitOptions extends AgentOption {
  /** Give up after this long (ms) with a RunTimeoutError (default 30 minutes); each poll keeps the client's request timeout. */
  timeoutMs?: number;
  /** The longest pause between two polls (ms); polls start fast and slow down to it (default 2000). */
  pollIntervalMs?: number;
  /** Stops waiting. */
  signal?: AbortSignal;
}

/** `runs.files`: which files. */
export type RunFilesOptions = CamelKeys<RunFilesQuery> & AgentOption & RequestOptions;

/** The runs of an agent (`browser-agent` unless `agent` says otherwise). */
export class Runs {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Starts a run (it returns at once, `queued`); `files` are uploaded and attached first. */
  async create(options: CreateRunOptions): Promise<RunCreated> {
    const { agent, files, signal, timeoutMs, maxRetries, idempotencyKey, ...request } = options;
    const req = { signal, timeoutMs, maxRetries };
    let attachedFileIds = request.attachedFileIds;
    if (files?.length) {
      const uploaded = await uploadFiles(this.#core, `${agentPath({ agent })}/files`, files.map((input) => ({ input })), req);
      attachedFileIds = [...(attachedFileIds ?? []), ...uploaded.map((f) => f.id)];
    }
    const body = toSnake({ ...request, attachedFileIds }) as CreateRunRequest;
    // Without one, the core sends a key of its own (the same on each of its retries).
    const keyed = idempotencyKey === undefined ? {} : { headers: { 'Idempotency-Key': idempotencyKey } };
    return this.#core.request<RunCreated>('POST', `${agentPath({ agent })}/runs`, { ...req, ...keyed, body });
  }

  /** The full run. */
  get(runId: string, options: AgentOption & RequestOptions = {}): Promise<Run> {
    return this.#core.request<Run>('GET', `${agentPath(options)}/runs/${seg(runId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** The run's status, result and cost (the cheap call to poll). */
  status(runId: string, options: AgentOption & RequestOptions = {}): Promise<RunStatus> {
    return this.#core.request<RunStatus>('GET', `${agentPath(options)}/runs/${seg(runId)}/status`, { ...requestOptions(options), idempotent: true });
  }

  /** Stops a queued or running run; returns it, `stopped` (a ConflictError when it had already ended). */
  stop(runId: string, options: AgentOption & RequestOptions = {}): Promise<Run> {
    return this.#core.request<Run>('POST', `${agentPath(options)}/runs/${seg(runId)}/stop`, { ...requestOptions(options), idempotent: true });
  }

  /** The agent's runs, newest first, across pages (filter by `sessionId`, `status`; `limit` is the page size). */
  list(options: ListRunsOptions = {}): PageIterator<Run> {
    const { agent, signal, timeoutMs, maxRetries, cursor, ...filters } = options;
    return new PageIterator<Run>(async (start) => {
      const page = await this.#core.request<RunList>('GET', `${agentPath({ agent })}/runs`, {
        signal,
        timeoutMs,
        maxRetries,
        idempotent: true,
        query: { ...(toSnake(filters) as ListRunsQuery), cursor: start },
      });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, cursor);
  }

  /** The run's browser steps after step `after`, across pages (as far as the run has got). */
  steps(runId: string, options: AfterOptions = {}): PageIterator<Step, number> {
    return new PageIterator<Step, number>(async (after) => {
      const page = await this.#core.request<StepList>('GET', `${agentPath(options)}/runs/${seg(runId)}/steps`, {
        ...requestOptions(options),
        idempotent: true,
        query: { after, limit: options.limit },
      });
      return { items: page.steps, next: page.nextAfter, hasMore: page.hasMore };
    }, options.after);
  }

  /** The run's events after event id `after`, across pages (as far as the run has got). */
  events(runId: string, options: AfterOptions = {}): PageIterator<Event, number> {
    return new PageIterator<Event, number>(async (after) => {
      const page = await this.#core.request<EventList>('GET', `${agentPath(options)}/runs/${seg(runId)}/events`, {
        ...requestOptions(options),
        idempotent: true,
        query: { after, limit: options.limit },
      });
      return { items: page.events, next: page.nextAfter, hasMore: page.hasMore };
    }, options.after);
  }

  /**
   * The run's events as they happen (server-sent events), from the first (or after `after`) to the
   * terminal one (`run.completed`, `run.failed`, `run.stopped`), then the iteration ends. A dropped
   * connection is resumed from the last event seen (`Last-Event-ID`): no event is repeated or lost.
   */
  async *stream(runId: string, options: StreamOptions = {}): AsyncGenerator<Event, void, undefined> {
    const path = `${agentPath(options)}/runs/${seg(runId)}/events/stream`;
    const maxRetries = options.maxRetries ?? this.#core.maxRetries;
    const idleMs = options.idleTimeoutMs ?? 45_000;
    let last = options.after ?? 0;
    let failures = 0;
    for (;;) {
      const connection = new AbortController();
      const stopOnAbort = () => connection.abort(options.signal?.reason);
      options.signal?.addEventListener('abort', stopOnAbort, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const watchdog = () => {
        clearTimeout(idle);
        idle = setTimeout(() => connection.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
      };
      let dropped: unknown;
      try {
        const res = await this.#core.openStream(path, {
          signal: connection.signal,
          // A resumed connection says where it stopped, as SSE does (and so does a first one given `after`).
          ...(last > 0 ? { headers: { 'Last-Event-ID': String(last) } } : {}),
        });
        if (!res.body) throw new APIConnectionError(`GET /api/v1${path}: the reply has no body`);
        watchdog();
        for await (const sse of parseSse(res.body, watchdog)) {
          const event = JSON.parse(sse.data) as Event;
          if (event.id <= last) continue;
          last = event.id;
          failures = 0;
          yield event;
          if (TERMINAL_EVENT_TYPES.includes(event.type)) return;
        }
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        // An error reply (404, 401, …) is final; a connection that failed or broke is resumed.
        if (err instanceof APIError && err.status !== undefined && err.status !== 503 && err.status !== 504) throw err;
        dropped = err;
      } finally {
        clearTimeout(idle);
        options.signal?.removeEventListener('abort', stopOnAbort);
        connection.abort();
      }
      if (dropped === undefined) {
        // The server ended the stream before a terminal event: if the run has ended meanwhile,
        // its last events are in the list; otherwise connect again.
        const { status } = await this.status(runId, { agent: options.agent, signal: options.signal });
        if (TERMINAL_STATUSES.includes(status)) {
          for await (const event of this.events(runId, { agent: options.agent, after: last, signal: options.signal })) yield event;
          return;
        }
      }
      if (failures >= maxRetries) {
        throw dropped instanceof APIError ? dropped : new APIConnectionError(`GET /api/v1${path}: the event stream broke off`, dropped);
      }
      await sleep(backoffMs(failures), options.signal);
      failures++;
    }
  }

  /** Waits for the run to end (polling its status with backoff) and returns the final run; a RunTimeoutError names it when it does not end in time. */
  async wait(runId: string, options: WaitOptions = {}): Promise<Run> {
    const limitMs = options.timeoutMs ?? 30 * 60_000;
    const call = { agent: options.agent, signal: options.signal };
    const maxPauseMs = options.pollIntervalMs ?? 2000;
    const deadline = Date.now() + limitMs;
    let pause = Math.min(250, maxPauseMs);
    for (;;) {
      const { status } = await this.status(runId, call);
      if (TERMINAL_STATUSES.includes(status)) return this.get(runId, call);
      const left = deadline - Date.now();
      if (left <= 0) throw new RunTimeoutError(runId, limitMs, status);
      await sleep(Math.min(pause, left), options.signal);
      pause = Math.min(pause * 2, maxPauseMs);
    }
  }

  /** The run's files (`kind`: `input`, `output`, or both), each able to download itself: every page of them (`limit`: files per request). */
  async files(runId: string, options: RunFilesOptions = {}): Promise<FileHandle[]> {
    const out: FileHandle[] = [];
    let cursor: string | undefined;
    do {
      const page: FileList = await this.#core.request<FileList>('GET', `${agentPath(options)}/runs/${seg(runId)}/files`, {
        ...requestOptions(options),
        idempotent: true,
        query: { kind: options.kind, limit: options.limit, cursor },
      });
      out.push(...page.items.map((f) => new FileHandle(this.#core, f)));
      cursor = page.hasMore && page.nextCursor ? page.nextCursor : undefined;
    } while (cursor);
    return out;
  }
}
