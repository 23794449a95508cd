/**
 * The pool's CDP client: one connection per browser over Chromium's `--remote-debugging-pipe`
 * (NUL-terminated JSON on fds 3 and 4), the only way into the browser: it has no DevTools port.
 * The pipe is held by the browser's supervisor (supervisor.ts), reached over a Unix socket, so
 * Chromium outlives this process; a connection made again after a restart (`adopted`) takes
 * command ids far from the previous process's (a late answer to that one is never taken for one
 * of ours) and detaches the sessions the previous process left, as their messages come.
 * Flattened sessions: a message for a page carries its `sessionId`.
 *
 * CDP clients of the proxy are multiplexed over the same pipe as channels: each gets a browser
 * (or page) session of its own (`Target.attachToBrowserTarget`), its command ids are remapped so
 * they never meet the pool's, and it sees only the events of the sessions it owns.
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

/** Largest message read from the pipe (characters); V8 strings end a little above 512 Mi. */
const MAX_MESSAGE_CHARS = 400 * 1024 * 1024;

/** A CDP message as clients and Chromium send it. */
export interface CdpMessage {
  id?: number;
  method?: string;
  params?: any;
  result?: any;
  error?: { code?: number; message: string };
  sessionId?: string;
}

/**
 * What a channel's guard says of a client's command: refuse it (with the reason) or send it
 * (possibly rewritten; `result` edits its answer's result before the client gets it).
 */
export type GuardVerdict = { refuse: string } | { send: CdpMessage; result?: (result: any) => any };

/**
 * The client's copy of a message from Chromium, made by editing its text instead of encoding it
 * again (a page's DOM or a screenshot is passed on, not rebuilt): the client's id in place of
 * ours, and no `sessionId` when it is the client's root session. Only where the edit is exact —
 * Chromium writes `id` first and appends `sessionId` last; undefined otherwise (then re-encoded).
 */
export function retext(text: string, msg: CdpMessage, clientId: number | undefined, root: string): string | undefined {
  let out = text;
  if (clientId !== undefined) {
    const ours = `{"id":${msg.id},`;
    if (!out.startsWith(ours)) return undefined;
    out = `{"id":${clientId},${out.slice(ours.length)}`;
  }
  if (msg.sessionId === root) {
    const tail = `,"sessionId":${JSON.stringify(root)}}`;
    if (!out.endsWith(tail)) return undefined;
    out = `${out.slice(0, -tail.length)}}`;
  }
  return out;
}

/** One CDP client multiplexed over the pipe: its own root session, the sessions it attached, its ids. */
export class CdpChannel {
  readonly root: string;
  readonly #conn: CdpConnection;
  readonly #deliver: (text: string) => void;
  readonly #guard: (msg: CdpMessage) => GuardVerdict;
  readonly #owned = new Set<string>();
  #closed = false;
  #onClose: (() => void) | undefined;

  constructor(conn: CdpConnection, root: string, deliver: (text: string) => void, guard: (msg: CdpMessage) => GuardVerdict) {
    this.#conn = conn;
    this.root = root;
    this.#deliver = deliver;
    this.#guard = guard;
    this.#owned.add(root);
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /** Called once when the channel ends from the browser's side (its root session or the pipe went away). */
  onClose(fn: () => void): void {
    this.#onClose = fn;
  }

  /** A client's message: checked, addressed to its session, sent with an id of the connection's own. */
  send(text: string): void {
    if (this.#closed) return;
    let msg: CdpMessage;
    try {
      msg = JSON.parse(text);
    } catch {
      return this.#deliver(JSON.stringify({ error: { code: -32700, message: 'Message must be a valid JSON' } }));
    }
    if (typeof msg !== 'object' || msg === null || typeof msg.id !== 'number' || typeof msg.method !== 'string') {
      return this.#deliver(JSON.stringify({ id: msg?.id, error: { code: -32600, message: 'Message must have integer id and string method' } }));
    }
    const reply = (error: string, code = -32000) =>
      this.#deliver(JSON.stringify({ id: msg.id, error: { code, message: error }, ...(msg.sessionId ? { sessionId: msg.sessionId } : {}) }));
    if (msg.sessionId !== undefined && !this.#owned.has(msg.sessionId)) return reply('Session with given id not found.', -32001);
    const verdict = this.#guard(msg);
    if ('refuse' in verdict) return reply(verdict.refuse);
    this.#conn.relay(this, msg.id, { ...verdict.send, sessionId: msg.sessionId ?? this.root }, verdict.result);
  }

  /** @internal A message from Chromium (`text`, parsed as `msg`) for this channel: an answer to it, or an event of a session it owns. */
  receive(msg: CdpMessage, text: string, clientId?: number, edit?: (result: any) => any): void {
    if (this.#closed) return;
    if (clientId === undefined) {
      if (msg.method === 'Target.attachedToTarget' && msg.params?.sessionId) this.#own(msg.params.sessionId);
      else if (msg.method === 'Target.detachedFromTarget' && msg.params?.sessionId) this.#disown(msg.params.sessionId);
    } else if (typeof msg.result?.sessionId === 'string') {
      this.#own(msg.result.sessionId);
    }
    // An answer whose result the guard edits is encoded again; any other is passed on as text.
    const result = edit && msg.result !== undefined ? edit(msg.result) : undefined;
    const edited = result === undefined ? retext(text, msg, clientId, this.root) : undefined;
    if (edited !== undefined) return this.#deliver(edited);
    const out: CdpMessage = clientId === undefined ? msg : { ...msg, id: clientId, ...(result === undefined ? {} : { result }) };
    if (out.sessionId === this.root) delete out.sessionId;
    this.#deliver(JSON.stringify(out));
  }

  #own(sessionId: string): void {
    this.#owned.add(sessionId);
    this.#conn.own(sessionId, this);
  }

  #disown(sessionId: string): void {
    this.#owned.delete(sessionId);
    this.#conn.disown(sessionId);
  }

  /** @internal The browser side is gone (its root session or the pipe): the channel ends. Idempotent. */
  end(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#owned) this.#conn.disown(s, true);
    this.#conn.forget(this);
    this.#onClose?.();
  }

  /** The client left: its sessions are detached (its pages stay open). Idempotent. */
  close(): void {
    if (this.#closed) return;
    const sessions = [...this.#owned].reverse();
    this.end();
    for (const sessionId of sessions) this.#conn.send('Target.detachFromTarget', { sessionId }).catch(() => {});
  }
}

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
  /** Commands of channels in flight: our id → the channel and its client's id. */
  readonly #relayed = new Map<number, { channel: CdpChannel; clientId: number; edit?: ((result: any) => any) | undefined }>();
  /** Sessions that belong to a channel, not to the pool. */
  readonly #owners = new Map<string, CdpChannel>();
  readonly #channels = new Set<CdpChannel>();
  /** Sessions of ended channels, until Chromium says they are detached: their late events go nowhere. */
  readonly #dead = new Set<string>();
  readonly #defaultTimeoutMs: number;
  /** Adopted: the sessions attached over this connection (any other is a previous process's, detached when heard from). */
  readonly #known: Set<string> | undefined;
  #nextId = 1;
  #buffer = '';
  #closed = false;
  #closedResolve!: () => void;
  /** Resolves when the connection is closed (by us or because Chromium went away). */
  readonly closed: Promise<void>;

  constructor(pipeIn: Readable, pipeOut: Writable, defaultTimeoutMs = 30000, o: { adopted?: boolean } = {}) {
    this.#in = pipeIn;
    this.#out = pipeOut;
    this.#defaultTimeoutMs = defaultTimeoutMs;
    if (o.adopted) {
      this.#known = new Set();
      // Chromium takes ids up to 2^31 - 1; the previous process counted up from 1.
      this.#nextId = 1_000_000_000 + Math.floor(Math.random() * 500_000_000);
    }
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
    if (this.#buffer.length + chunk.length > MAX_MESSAGE_CHARS) {
      // One message larger than any string we can hold: this browser's connection cannot go on.
      this.close();
      return;
    }
    let start = 0;
    for (let end = chunk.indexOf('\0'); end !== -1; end = chunk.indexOf('\0', start)) {
      const text = this.#buffer + chunk.slice(start, end);
      this.#buffer = '';
      start = end + 1;
      try {
        this.#dispatch(text);
      } catch {
        /* a message we could not hand on (too large to re-encode) must not take the pool down */
      }
    }
    this.#buffer += chunk.slice(start);
  }

  #dispatch(text: string): void {
    let msg: CdpMessage;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (this.#known) {
      if (typeof msg.result?.sessionId === 'string') this.#known.add(msg.result.sessionId);
      if (msg.method === 'Target.attachedToTarget' && typeof msg.params?.sessionId === 'string') this.#known.add(msg.params.sessionId);
      if (msg.method === 'Target.detachedFromTarget' && typeof msg.params?.sessionId === 'string') this.#known.delete(msg.params.sessionId);
      if (msg.id === undefined && msg.sessionId !== undefined && !this.#known.has(msg.sessionId) && !this.#dead.has(msg.sessionId)) {
        // A session of the previous pool process (its tabs, screencast, clients): no one here listens.
        this.#dead.add(msg.sessionId);
        this.send('Target.detachFromTarget', { sessionId: msg.sessionId }).catch(() => {});
        return;
      }
    }
    if (msg.id !== undefined) {
      const relayed = this.#relayed.get(msg.id);
      if (relayed) {
        this.#relayed.delete(msg.id);
        relayed.channel.receive(msg, text, relayed.clientId, relayed.edit);
        return;
      }
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new CdpError(p.method, msg.error.message));
      else p.resolve(msg.result ?? {});
      return;
    }
    if (!msg.method) return;
    const owner = msg.sessionId === undefined ? undefined : this.#owners.get(msg.sessionId);
    if (owner) return owner.receive(msg, text);
    if (msg.sessionId !== undefined && this.#dead.has(msg.sessionId)) {
      if (msg.method === 'Target.detachedFromTarget') this.#dead.delete((msg.params as { sessionId?: string })?.sessionId ?? '');
      return;
    }
    if (msg.method === 'Target.detachedFromTarget') {
      // A channel's root session hangs off our own: when its target goes, so does the channel.
      const sessionId = (msg.params as { sessionId?: string })?.sessionId ?? '';
      const gone = this.#owners.get(sessionId);
      if (gone && gone.root === sessionId) gone.end();
      if (this.#dead.delete(sessionId)) return;
    }
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

  /**
   * A new CDP client over this pipe, rooted at the browser (or at one page when `targetId` is
   * given); `deliver` gets every message for it, `guard` sees each of its commands first.
   */
  async openChannel(targetId: string | undefined, deliver: (text: string) => void, guard: (msg: CdpMessage) => GuardVerdict): Promise<CdpChannel> {
    const { sessionId } = targetId
      ? await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true })
      : await this.send<{ sessionId: string }>('Target.attachToBrowserTarget');
    const channel = new CdpChannel(this, sessionId, deliver, guard);
    if (this.#closed) {
      channel.end();
      return channel;
    }
    this.#channels.add(channel);
    this.#owners.set(sessionId, channel);
    return channel;
  }

  /** @internal */
  relay(channel: CdpChannel, clientId: number, msg: CdpMessage, edit?: (result: any) => any): void {
    if (this.#closed) return;
    const id = this.#nextId++;
    this.#relayed.set(id, { channel, clientId, edit });
    this.#out.write(JSON.stringify({ ...msg, id }) + '\0');
  }

  /** @internal */
  own(sessionId: string, channel: CdpChannel): void {
    this.#owners.set(sessionId, channel);
  }

  /** @internal */
  disown(sessionId: string, ended = false): void {
    this.#owners.delete(sessionId);
    if (ended && this.#dead.size < 10000) this.#dead.add(sessionId);
  }

  /** Bytes written to the pipe and not yet taken by Chromium (a client that floods it is cut off). */
  get backlog(): number {
    return this.#out.writableLength;
  }

  /** @internal */
  forget(channel: CdpChannel): void {
    this.#channels.delete(channel);
    for (const [id, r] of this.#relayed) if (r.channel === channel) this.#relayed.delete(id);
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
    for (const c of [...this.#channels]) c.end();
    this.#relayed.clear();
    this.#out.destroy();
    this.#in.destroy();
    this.#closedResolve();
  }
}
