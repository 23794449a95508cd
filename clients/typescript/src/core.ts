/**
 * The HTTP layer every resource goes through: the key header, JSON in and out, timeouts, retries
 * of idempotent calls (connection errors, timeouts, 503 and 504; exponential backoff with jitter) and errors by
 * status. It uses only fetch, so it runs in Node ≥ 20 and in a browser alike.
 */
import {
  APIConnectionError,
  APIError,
  APIStatusError,
  APITimeoutError,
  UnprocessableEntityError,
  statusErrorClass,
} from './errors.js';
import type { ValidationErrorItem } from './models.js';

/** The fetch the SDK calls; pass your own to add tracing, a proxy agent or a test double. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** How to reach the API; every field falls back to the environment or a default. */
export interface ClientOptions {
  /** The project's API key; default `ATS_API_KEY`. Sent as `X-Service-API-Key`, only to the API. */
  apiKey?: string;
  /** The server's root, e.g. `http://localhost:8080` (a trailing `/api/v1` is fine); default `ATS_BASE_URL`, else `http://localhost:8080`. */
  baseUrl?: string;
  /** Retries of an idempotent call after a connection error, a timeout, a 503 or a 504 (default 2). */
  maxRetries?: number;
  /** Time allowed for each request, in ms (default 60000). */
  timeoutMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: Fetch;
}

/** Options every call takes. */
export interface RequestOptions {
  /** Aborts the call (its retries and waits too). */
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
  /** Overrides the client's `maxRetries` for this call. */
  maxRetries?: number;
}

type QueryValue = string | number | boolean | undefined | null;

interface CallOptions extends RequestOptions {
  query?: Record<string, QueryValue>;
  body?: unknown;
  /** GET, DELETE and stops: safe to send again after a connection error or a 503 (every POST is, by its Idempotency-Key). */
  idempotent?: boolean;
  headers?: Record<string, string>;
}

const DEFAULT_BASE_URL = 'http://localhost:8080';
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_RETRIES = 2;
/** Replies worth another try of an idempotent call: a service unavailable (503) or late (504) behind the gateway. */
const RETRIED_STATUSES = new Set([503, 504]);

/**
 * A fresh `Idempotency-Key` for a POST that came without one, sent on each of its attempts: the
 * API answers a repeat with the first response, so the SDK's own retries never create twice.
 * (A page served over plain http has no `crypto.randomUUID`, only `getRandomValues`.)
 */
export function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === 'function') return c.randomUUID();
  const hex = Array.from(c.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const hasHeader = (headers: Record<string, string> | undefined, name: string) => Object.keys(headers ?? {}).some((h) => h.toLowerCase() === name);

/** The environment in Node; nothing in a browser (no `process` there). */
function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = proc?.env?.[name];
  return value === '' ? undefined : value;
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener('abort', abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/** The wait before retry number `attempt` (0-based): 0.5 s doubling up to 8 s, less up to a quarter at random. */
export function backoffMs(attempt: number): number {
  return Math.min(500 * 2 ** attempt, 8000) * (1 - Math.random() * 0.25);
}

/** One signal that aborts when any of `signals` does (AbortSignal.any where the runtime has it). */
function anySignal(signals: AbortSignal[]): AbortSignal {
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

/** A URL as safe to print: origin and path, never the query (a presigned link's signature lives there). */
export function printableUrl(url: string | URL): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

/** An error of Node's file system (writing a download), which has a path; a socket's errors have none. */
function isFileSystemError(err: unknown): boolean {
  return typeof (err as { syscall?: unknown })?.syscall === 'string' && typeof (err as { path?: unknown }).path === 'string';
}

/** Turns an error reply into the error class of its status. */
export async function errorFromResponse(res: Response, what: string): Promise<APIStatusError> {
  const text = await res.text().catch(() => '');
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  const raw = body !== null && typeof body === 'object' ? (body as { detail?: unknown }).detail : undefined;
  const requestId = res.headers.get('x-request-id');
  const init = { status: res.status, requestId, body, headers: res.headers, what };
  if (res.status === 422 && Array.isArray(raw)) {
    const errors = raw as ValidationErrorItem[];
    const detail = errors.map((e) => `${(e.loc ?? []).join('.')}: ${e.msg}`).join('; ');
    return new UnprocessableEntityError({ ...init, detail, errors });
  }
  const detail = typeof raw === 'string' ? raw : typeof body === 'string' && body ? body.slice(0, 300) : null;
  const Cls = statusErrorClass(res.status);
  return new Cls({ ...init, detail });
}

/** The SDK's connection to the API, shared by the resources. */
export class Core {
  /** The server's root, without `/api/v1`. */
  readonly baseUrl: string;
  readonly maxRetries: number;
  readonly timeoutMs: number;
  readonly #apiKey: string;
  readonly #fetch: Fetch;

  constructor(options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env('ATS_API_KEY');
    if (!apiKey) throw new TypeError('No API key: pass { apiKey } or set ATS_API_KEY');
    this.#apiKey = apiKey;
    const base = (options.baseUrl ?? env('ATS_BASE_URL') ?? DEFAULT_BASE_URL).replace(/\/+$/, '').replace(/\/api\/v1$/, '');
    this.baseUrl = new URL(base).href.replace(/\/+$/, '');
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // A browser's fetch must be called on the global object ("Illegal invocation" otherwise).
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** The full URL of an API path (`/agents` → `<base>/api/v1/agents`) with its query. */
  url(path: string, query: Record<string, QueryValue> = {}): string {
    const u = new URL(`${this.baseUrl}/api/v1${path}`);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    return u.href;
  }

  /** A link the API handed out (upload, download), made absolute against the server. */
  resolve(link: string): string {
    return new URL(link, `${this.baseUrl}/`).href;
  }

  /** Calls the API and returns the reply's JSON body (undefined for 204). */
  async request<T>(method: string, path: string, options: CallOptions = {}): Promise<T> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { Accept: 'application/json', 'X-Service-API-Key': this.#apiKey, ...options.headers };
    if (method === 'POST') {
      // One key for every attempt of this call (the caller's, else a new one): retrying it is safe.
      if (!hasHeader(options.headers, 'idempotency-key')) headers['Idempotency-Key'] = newIdempotencyKey();
      options = { ...options, idempotent: true };
    }
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    const what = `${method} /api/v1${path}`;
    const res = await this.fetchWithRetries(url, { method, headers, body }, what, options, async (r) => {
      if (r.status === 204) return undefined;
      const text = await r.text();
      try {
        return text ? (JSON.parse(text) as unknown) : undefined;
      } catch (err) {
        throw new APIError(`${what}: the reply (${r.status}) is not JSON`, { status: r.status, requestId: r.headers.get('x-request-id'), cause: err });
      }
    });
    return res as T;
  }

  /**
   * Sends one request, retrying an idempotent one after a connection error, a timeout, a 503 or a 504.
   * `read` consumes the successful reply inside the same timeout (a reply cut midway is a
   * connection error, retried like one). `what` names the request in errors.
   */
  async fetchWithRetries<R>(
    url: string,
    init: RequestInit,
    what: string,
    options: RequestOptions & { idempotent?: boolean },
    read: (res: Response) => Promise<R>,
  ): Promise<R> {
    const maxRetries = options.idempotent ? (options.maxRetries ?? this.maxRetries) : 0;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = options.signal ? anySignal([options.signal, timeout]) : timeout;
      let retryAfterMs: number | undefined;
      try {
        const res = await this.#fetch(url, { ...init, signal });
        if (res.ok) return await read(res);
        if (!RETRIED_STATUSES.has(res.status) || attempt >= maxRetries) throw await errorFromResponse(res, what);
        await res.body?.cancel().catch(() => undefined);
        const advised = Number(res.headers.get('retry-after'));
        if (Number.isFinite(advised) && advised > 0) retryAfterMs = Math.min(advised, 60) * 1000;
      } catch (err) {
        if (err instanceof APIError || isFileSystemError(err)) throw err; // a reply that says no, or the local disk: not the connection
        if (options.signal?.aborted) throw options.signal.reason;
        const failure = timeout.aborted ? new APITimeoutError(what, timeoutMs, err) : new APIConnectionError(what, err);
        if (attempt >= maxRetries) throw failure;
      }
      await sleep(retryAfterMs ?? backoffMs(attempt), options.signal);
    }
  }

  /** Opens a streaming GET on the API (server-sent events); the caller reads and closes the body. */
  async openStream(path: string, options: { query?: Record<string, QueryValue>; headers?: Record<string, string>; signal: AbortSignal; timeoutMs?: number }): Promise<Response> {
    const url = this.url(path, options.query);
    const what = `GET /api/v1${path}`;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    // The timeout bounds waiting for the reply's head only; the events may take as long as the run.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), timeoutMs);
    const signal = anySignal([options.signal, timeout.signal]);
    try {
      const res = await this.#fetch(url, { method: 'GET', headers: { Accept: 'text/event-stream', 'X-Service-API-Key': this.#apiKey, ...options.headers }, signal });
      if (!res.ok) throw await errorFromResponse(res, what);
      return res;
    } catch (err) {
      if (err instanceof APIStatusError || options.signal.aborted) throw err;
      throw timeout.signal.aborted ? new APITimeoutError(what, timeoutMs, err) : new APIConnectionError(what, err);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A request to a presigned link (upload or download): no API key, retried as idempotent. */
  async presigned<R>(method: 'GET' | 'PUT', link: string, init: RequestInit, options: RequestOptions, read: (res: Response) => Promise<R>): Promise<R> {
    const url = this.resolve(link);
    return this.fetchWithRetries(url, { ...init, method }, `${method} ${printableUrl(url)}`, { ...options, idempotent: true }, read);
  }
}
