/**
 * One embedded PGlite served to every service of a stack over the Postgres wire protocol, on a
 * Unix socket. Each service then holds a `pg` pool instead of a WebAssembly Postgres of its own:
 * five copies of Postgres (≈ 70 MB each, and most of a service's start) become one.
 *
 * PGlite is one session, so clients take turns: a client holds the session from the first message
 * of a request (a simple Query, or extended-protocol messages up to Sync) until Postgres is idle
 * again (ReadyForQuery 'I'); inside a transaction it keeps the session until the transaction ends,
 * so no other client's statement ever runs inside it. What a session carries besides transactions
 * is switched per client: its `search_path` (each service's tables live in its own schema), set at
 * the startup (`options=-c search_path=…`) or with `set search_path to …`. A client that leaves,
 * or idles in a transaction while others wait, is rolled back. Clients authenticate with a
 * password (cleartext is enough: the socket is local, in a folder only this user can enter).
 *
 * What this does not give: parallel queries, COPY, LISTEN/NOTIFY, cancel requests, and session
 * advisory locks that exclude (every client shares the one session).
 */
import { timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import type { PGlite } from '@electric-sql/pglite';
import type { Logger } from './logger.js';

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;
/** A frontend message larger than this ends the connection (Postgres's own limit is 1 GB; ours are small). */
const MAX_MESSAGE = 64 << 20;

export interface PgliteServerOptions {
  db: PGlite;
  /** The password every client must give. */
  password: string;
  logger?: Logger;
  /** A client idle inside a transaction this long while another waits is rolled back and disconnected. */
  idleInTransactionMs?: number;
}

interface Client {
  id: number;
  socket: net.Socket;
  buffer: Buffer;
  phase: 'startup' | 'password' | 'ready' | 'closed';
  /** Messages of an extended-protocol request not yet ended by Sync or Flush. */
  pending: Buffer[];
  /** Requests in arrival order, run one after another. */
  chain: Promise<void>;
  searchPath: string | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  /** A request of this client is running in PGlite now. */
  busy: boolean;
}

/** Read through a call: a client's phase changes while a request awaits PGlite. */
function closed(c: Client): boolean {
  return c.phase === 'closed';
}

/** Builds one backend message: type, length, body. */
function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function cstrings(...parts: string[]): Buffer {
  return Buffer.concat(parts.map((p) => Buffer.from(`${p}\0`, 'utf8')));
}

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

/** A FATAL ErrorResponse, sent before a connection is ended. */
function fatal(code: string, text: string): Buffer {
  return message('E', Buffer.concat([cstrings('SFATAL', 'VFATAL', `C${code}`, `M${text}`), Buffer.from([0])]));
}

/** A simple Query message. */
export function queryMessage(sql: string): Buffer {
  return message('Q', cstrings(sql));
}

/** The status of the last ReadyForQuery in a backend reply ('I' idle, 'T' in a transaction, 'E' failed one), if any. */
export function lastReadyStatus(reply: Uint8Array): string | undefined {
  let status: string | undefined;
  for (let i = 0; i + 5 <= reply.length; ) {
    const len = (reply[i + 1]! << 24) | (reply[i + 2]! << 16) | (reply[i + 3]! << 8) | reply[i + 4]!;
    if (reply[i] === 0x5a && len === 5) status = String.fromCharCode(reply[i + 5]!);
    i += 1 + len;
  }
  return status;
}

/** The value of `set search_path to …` (or `= …`) when `sql` is only that statement. */
export function searchPathSet(sql: string): string | undefined {
  const m = /^\s*set\s+(?:session\s+)?search_path\s*(?:to|=)\s*([^;]+?)\s*;?\s*$/is.exec(sql);
  return m?.[1];
}

/** The search_path an `options` startup parameter sets (`-c search_path=x` or `--search_path=x`). */
function searchPathOption(options: string | undefined): string | undefined {
  const m = /(?:-c\s*|--)search_path=((?:\\ |[^\s])+)/.exec(options ?? '');
  return m?.[1]?.replace(/\\ /g, ' ');
}

export class PgliteServer {
  readonly #o: PgliteServerOptions;
  readonly #server: net.Server;
  readonly #clients = new Set<Client>();
  #nextId = 1;
  /** The client holding the session, and those waiting for it in order. */
  #owner: Client | undefined;
  readonly #waiting: { client: Client; resolve: () => void }[] = [];
  /** The search_path the session has now. */
  #searchPath = 'public';
  #serverVersion = '';
  #stopped = false;

  constructor(o: PgliteServerOptions) {
    this.#o = o;
    this.#server = net.createServer((socket) => this.#accept(socket));
  }

  /** Listens on the Unix socket at `socketPath` (a stale file there is removed first: call it holding the data directory's lock). */
  async listen(socketPath: string): Promise<void> {
    const rows = await this.#o.db.query<{ v: string }>('show server_version');
    this.#serverVersion = rows.rows[0]?.v ?? '';
    fs.rmSync(socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(socketPath, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    fs.chmodSync(socketPath, 0o600);
  }

  /** How many clients wait for the session. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Stops listening and ends every connection (an open transaction is rolled back). Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const c of this.#clients) c.socket.destroy();
    await Promise.all([...this.#clients].map((c) => c.chain));
    await closed;
  }

  #accept(socket: net.Socket): void {
    const client: Client = { id: this.#nextId++, socket, buffer: Buffer.alloc(0), phase: 'startup', pending: [], chain: Promise.resolve(), searchPath: undefined, idleTimer: undefined, busy: false };
    this.#clients.add(client);
    socket.on('data', (data) => this.#onData(client, data));
    socket.on('error', () => undefined); // a client that vanished: 'close' follows
    socket.on('close', () => this.#onClose(client));
  }

  #onData(c: Client, data: Buffer): void {
    c.buffer = c.buffer.length ? Buffer.concat([c.buffer, data]) : data;
    while (c.phase !== 'closed') {
      const typed = c.phase !== 'startup';
      const head = typed ? 5 : 4;
      if (c.buffer.length < head) return;
      const len = c.buffer.readInt32BE(typed ? 1 : 0);
      if (len < 4 || len > MAX_MESSAGE) return this.#end(c, fatal('08P01', 'invalid message length'));
      const total = len + (typed ? 1 : 0);
      if (c.buffer.length < total) return;
      const msg = c.buffer.subarray(0, total);
      c.buffer = c.buffer.subarray(total);
      if (c.phase === 'startup') this.#onStartup(c, msg);
      else if (c.phase === 'password') this.#onPassword(c, msg);
      else this.#onMessage(c, msg);
    }
  }

  #onStartup(c: Client, msg: Buffer): void {
    const code = msg.length >= 8 ? msg.readInt32BE(4) : 0;
    if (code === SSL_REQUEST || code === GSS_REQUEST) return void c.socket.write('N');
    if (code === CANCEL_REQUEST) return this.#end(c); // nothing to cancel in a single session
    if (code !== PROTOCOL_3) return this.#end(c, fatal('0A000', 'unsupported frontend protocol'));
    const fields = msg.subarray(8).toString('utf8').split('\0');
    const params: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length && fields[i]; i += 2) params[fields[i]!] = fields[i + 1]!;
    c.searchPath = searchPathOption(params.options);
    c.phase = 'password';
    c.socket.write(message('R', int32(3))); // AuthenticationCleartextPassword
  }

  #onPassword(c: Client, msg: Buffer): void {
    const given = msg[0] === 0x70 ? msg.subarray(5, msg.length - 1) : Buffer.alloc(0);
    const want = Buffer.from(this.#o.password, 'utf8');
    if (given.length !== want.length || !timingSafeEqual(given, want)) return this.#end(c, fatal('28P01', 'password authentication failed'));
    c.phase = 'ready';
    const status = (k: string, v: string) => message('S', cstrings(k, v));
    c.socket.write(
      Buffer.concat([
        message('R', int32(0)),
        status('server_version', this.#serverVersion),
        status('server_encoding', 'UTF8'),
        status('client_encoding', 'UTF8'),
        status('DateStyle', 'ISO, MDY'),
        status('integer_datetimes', 'on'),
        status('standard_conforming_strings', 'on'),
        message('K', Buffer.concat([int32(c.id), int32(0)])),
        message('Z', Buffer.from('I')),
      ]),
    );
  }

  #onMessage(c: Client, msg: Buffer): void {
    const type = String.fromCharCode(msg[0]!);
    if (type === 'X') return this.#end(c);
    c.pending.push(msg);
    // A request ends at a simple Query, a Sync, or a Flush (whose replies the client waits for).
    if (type !== 'Q' && type !== 'S' && type !== 'H') return;
    const request = c.pending.length === 1 ? msg : Buffer.concat(c.pending);
    c.pending = [];
    const setPath = type === 'Q' ? searchPathSet(msg.subarray(5, msg.length - 1).toString('utf8')) : undefined;
    c.chain = c.chain.then(() => this.#run(c, request, setPath, type === 'H'));
  }

  async #run(c: Client, request: Buffer, setPath: string | undefined, flush: boolean): Promise<void> {
    if (closed(c)) return;
    await this.#acquire(c);
    if (closed(c)) return this.#releaseAfterClose(c);
    clearTimeout(c.idleTimer);
    c.idleTimer = undefined;
    c.busy = true;
    try {
      if (c.searchPath !== undefined && c.searchPath !== this.#searchPath) {
        const status = lastReadyStatus(await this.#o.db.execProtocolRaw(queryMessage(`set search_path to ${c.searchPath}`)));
        if (status !== 'I') throw new Error(`could not set search_path to ${c.searchPath}`);
        this.#searchPath = c.searchPath;
      }
      const reply = await this.#o.db.execProtocolRaw(request);
      c.busy = false;
      const status = lastReadyStatus(reply);
      if (setPath !== undefined && status === 'I') this.#searchPath = c.searchPath = setPath;
      if (!closed(c)) c.socket.write(reply);
      if (closed(c)) return this.#releaseAfterClose(c);
      // Held until Postgres is idle again: through a transaction, and between a Flush and its Sync.
      if (status === 'I' && !flush) this.#release(c);
      else if (this.#waiting.length) this.#armIdleTimer(c);
    } catch (err) {
      c.busy = false;
      this.#o.logger?.error({ err: (err as Error).message, client: c.id }, 'database request failed; connection ended');
      this.#end(c, fatal('XX000', 'internal error in the embedded database'));
      await this.#releaseAfterClose(c);
    }
  }

  #acquire(c: Client): Promise<void> {
    if (this.#owner === undefined || this.#owner === c) {
      this.#owner = c;
      return Promise.resolve();
    }
    if (this.#owner.idleTimer === undefined) this.#armIdleTimer(this.#owner);
    return new Promise((resolve) => this.#waiting.push({ client: c, resolve }));
  }

  #release(c: Client): void {
    if (this.#owner !== c) return;
    clearTimeout(c.idleTimer);
    c.idleTimer = undefined;
    const next = this.#waiting.shift();
    this.#owner = next?.client;
    next?.resolve();
  }

  /** A client that held the session went away: its transaction, or half-sent request, is undone. */
  async #releaseAfterClose(c: Client): Promise<void> {
    if (this.#owner !== c) return;
    try {
      // A Sync ends an unfinished extended request; then an open transaction is rolled back.
      const status = lastReadyStatus(await this.#o.db.execProtocolRaw(message('S')));
      if (status !== 'I') await this.#o.db.execProtocolRaw(queryMessage('rollback'));
    } catch (err) {
      this.#o.logger?.error({ err: (err as Error).message }, 'could not roll back the transaction of a client that left');
    }
    this.#release(c);
  }

  /**
   * Armed while others wait for the session: the holder is rolled back and disconnected if it
   * sends nothing more for the limit while it holds the session (a running query is let finish).
   */
  #armIdleTimer(c: Client): void {
    clearTimeout(c.idleTimer);
    c.idleTimer = setTimeout(() => {
      c.idleTimer = undefined;
      if (this.#owner !== c || c.phase === 'closed') return;
      if (c.busy || !this.#waiting.length) return void (this.#waiting.length && this.#armIdleTimer(c));
      this.#o.logger?.warn({ client: c.id, waiting: this.#waiting.length }, 'a database client idled in its transaction while others waited; rolled back');
      this.#end(c, fatal('25P03', 'terminating connection due to idle-in-transaction timeout'));
      c.chain = c.chain.then(() => this.#releaseAfterClose(c));
    }, this.#o.idleInTransactionMs ?? 30_000);
    c.idleTimer.unref();
  }

  #end(c: Client, last?: Buffer): void {
    if (c.phase === 'closed') return;
    c.phase = 'closed';
    if (last && c.socket.writable) c.socket.end(last);
    else c.socket.end();
    c.socket.destroySoon();
  }

  #onClose(c: Client): void {
    c.phase = 'closed';
    this.#clients.delete(c);
    clearTimeout(c.idleTimer);
    const i = this.#waiting.findIndex((w) => w.client === c);
    if (i >= 0) this.#waiting.splice(i, 1)[0]!.resolve(); // its queued request sees 'closed' and returns
    c.chain = c.chain.then(() => this.#releaseAfterClose(c)); // a no-op unless it held the session
  }
}
