/**
 * The pool's own CDP client: one connection per browser over Chromium's
 * `--remote-debugging-pipe` (NUL-terminated JSON on fds 3 and 4). Besides needing no port, the
 * pipe ties Chromium's life to ours: when this process dies the pipe closes and Chromium exits.
 * Flattened sessions: a message for a page carries its `sessionId`.
 */
import type { Readable, Writable } from 'node:stream';

/** An error answer of a CDP command, or the connection going away under it. */
export class CdpError extends Error {
  readonly method: string;
  constructor(method: string, message: string) {
    super(`${method}: ${message}`);
    this.name = this.constructor.name;
    this.method = method;
  }
}

type Listener = (params: any, sessionId: string | undefined) => void;

interface Pending {
  method: string;
  resolve(v: any): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

/** A CDP client over a pair of pipes: commands, events, flattened sessions. */
export class CdpConnection {
  readonly #out: Writable;
  readonly #in: Readable;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #defaultTimeoutMs: number;
  #nextId = 1;
  #buffer = '';
  #closed = false;
  #closedResolve!: () => void;
  /** Resolves when the connection is closed (by us or because Chromium went away). */
  readonly closed: Promise<void>;

  constructor(pipeIn: Readable, pipeOut: Writable, defaultTimeoutMs = 30000) {
    this.#in = pipeIn;
    this.#out = pipeOut;
    this.#defaultTimeoutMs = defaultTimeoutMs;
    this.closed = new Promise((r) => (this.#closedResolve = r));
    pipeIn.setEncoding('utf8');
    pipeIn.on('data', (chunk: string) => this.#onData(chunk));
    pipeIn.on('close', () => this.close());
    pipeIn.on('error', () => this.close());
    pipeOut.on('error', () => this.close());
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  #onData(chunk: string): void {
    let start = 0;
    for (let end = chunk.indexOf('\0'); end !== -1; end = chunk.indexOf('\0', start)) {
      const text = this.#buffer + chunk.slice(start, end);
      this.#buffer = '';
      start = end + 1;
      this.#dispatch(text);
    }
    this.#buffer += chunk.slice(start);
  }

  #dispatch(text: string): void {
    let msg: { id?: number; method?: string; params?: unknown; result?: unknown; error?: { message: string }; sessionId?: string };
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.id !== undefined) {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new CdpError(p.method, msg.error.message));
      else p.resolve(msg.result ?? {});
      return;
    }
    if (!msg.method) return;
    const set = this.#listeners.get(msg.method);
    if (!set) return;
    for (const l of [...set]) {
      try {
        l(msg.params ?? {}, msg.sessionId);
      } catch {
        /* a listener's bug must not break the connection */
      }
    }
  }

  /** Sends a command (to a page when `sessionId` is given) and resolves to its result. */
  send<T = any>(method: string, params: object = {}, sessionId?: string, timeoutMs = this.#defaultTimeoutMs): Promise<T> {
    if (this.#closed) return Promise.reject(new CdpError(method, 'connection closed'));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new CdpError(method, `no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#out.write(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }) + '\0');
    });
  }

  /** Listens to an event; returns the function that stops listening. */
  on(method: string, listener: Listener): () => void {
    let set = this.#listeners.get(method);
    if (!set) this.#listeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Resolves with the first `method` event that passes `match`; rejects after `timeoutMs` or on close. */
  waitFor<T = any>(method: string, match: (params: T, sessionId: string | undefined) => boolean, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const off = this.on(method, (params, sessionId) => {
        if (!match(params, sessionId)) return;
        done();
        resolve(params);
      });
      const timer = setTimeout(() => {
        done();
        reject(new CdpError(method, `not seen within ${timeoutMs} ms`));
      }, timeoutMs);
      const onClose = () => {
        done();
        reject(new CdpError(method, 'connection closed'));
      };
      void this.closed.then(() => onClose());
      const done = () => {
        off();
        clearTimeout(timer);
      };
    });
  }

  /** Closes the pipe and fails every command still waiting. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new CdpError(p.method, 'connection closed'));
      this.#pending.delete(id);
    }
    this.#listeners.clear();
    this.#out.destroy();
    this.#in.destroy();
    this.#closedResolve();
  }
}
