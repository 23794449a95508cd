/**
 * One viewer's WebSocket. Frames are flow-controlled end to end: the page acks each frame once
 * it is drawn, and at most `maxUnacked` frames are in flight; a newer frame replaces one that
 * is waiting, so a slow viewer skips frames (its memory stays at one frame) and never slows the
 * others. Input is refused here, on the server, when the token is view-only; otherwise it goes
 * to the pool one event at a time, in order.
 */
import type WebSocket from 'ws';
import { AppError, RemoteError, Status } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import type { FeedEnd } from './frame-feed.js';
import type { LiveViewGrant } from './live-view-token.js';
import type { FrameSource } from './pool-client.js';
import type { Viewer } from './viewer-hub.js';
import { BadMessage, CloseCode, isCoalescable, parseClientMessage, toDispatchInput, type ServerMessage, type ViewerInput } from './viewer-protocol.js';

export interface ViewerConnectionOptions {
  ws: WebSocket;
  grant: LiveViewGrant;
  browserId: string;
  source: FrameSource;
  logger: Logger;
  maxUnacked: number;
  maxFps: number;
  /** Socket bytes queued beyond which no frame is sent, acks or not. */
  maxBufferedBytes?: number;
  /** Input events waiting for the pool beyond which moves and wheel turns are dropped. */
  maxQueuedInput?: number;
  now?: () => number;
}

/** Per-viewer counters (the benchmark and tests read them). */
export interface ViewerStats {
  sent: number;
  skipped: number;
  inputs: number;
  refused: number;
}

export class ViewerConnection implements Viewer {
  readonly #o: ViewerConnectionOptions;
  readonly #now: () => number;
  readonly stats: ViewerStats = { sent: 0, skipped: 0, inputs: 0, refused: 0 };
  #pending: Buffer | undefined;
  #pendingState: string | undefined;
  #unacked = 0;
  #lastSentAt = -Infinity;
  #timer: NodeJS.Timeout | undefined;
  #inputQueue: ViewerInput[] = [];
  #inputRunning = false;
  #closed = false;
  #expiry: NodeJS.Timeout | undefined;

  constructor(options: ViewerConnectionOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    const { ws } = options;
    ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary));
    ws.on('close', () => this.#teardown());
    ws.on('error', () => this.#teardown());
    this.#send({ t: 'hello', mode: options.grant.mode });
    // An open view ends with its link: the token is checked once, so its expiry is enforced here.
    const msLeft = options.grant.expiresAtSec * 1000 - this.#now();
    this.#expiry = setTimeout(() => this.close(CloseCode.tokenExpired, 'Link expired'), Math.min(Math.max(msLeft, 0), 2 ** 31 - 1));
  }

  get closed(): boolean {
    return this.#closed;
  }

  frame(packet: Buffer): void {
    if (this.#closed) return;
    if (this.#pending) this.stats.skipped++;
    this.#pending = packet;
    this.#pump();
  }

  /** Tab and URL changes: only the latest waits when the socket is backed up (a page retitling itself in a loop cannot fill memory). */
  state(json: string): void {
    if (this.#closed) return;
    this.#pendingState = json;
    this.#pump();
  }

  ended(json: string, end: FeedEnd): void {
    if (this.#closed) return;
    this.#o.ws.send(json);
    this.close(CloseCode.ended, end.reason === 'stopped' ? 'Browser stopped' : 'Browser not found');
  }

  close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#teardown();
    this.#o.ws.close(code, reason);
  }

  #teardown(): void {
    this.#closed = true;
    this.#pending = undefined;
    this.#pendingState = undefined;
    this.#inputQueue = [];
    clearTimeout(this.#timer);
    clearTimeout(this.#expiry);
  }

  #send(m: ServerMessage): void {
    if (!this.#closed) this.#o.ws.send(JSON.stringify(m));
  }

  /** Sends the waiting state and frame when the viewer has room for them and the rate cap allows. */
  #pump(): void {
    if (this.#closed) return;
    const full = () => this.#o.ws.bufferedAmount > (this.#o.maxBufferedBytes ?? 4 * 1024 * 1024);
    if (this.#pendingState && !full()) {
      const json = this.#pendingState;
      this.#pendingState = undefined;
      this.#o.ws.send(json, () => this.#pump());
    }
    if (!this.#pending || this.#timer || this.#unacked >= this.#o.maxUnacked || full()) return;
    const wait = this.#lastSentAt + 1000 / this.#o.maxFps - this.#now();
    if (wait > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#pump();
      }, wait);
      return;
    }
    const packet = this.#pending;
    this.#pending = undefined;
    this.#unacked++;
    this.#lastSentAt = this.#now();
    this.stats.sent++;
    this.#o.ws.send(packet, { binary: true }, () => this.#pump());
  }

  #onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    if (this.#closed) return;
    if (isBinary) return this.close(CloseCode.badMessage, 'Binary messages are not accepted');
    let msg;
    try {
      msg = parseClientMessage(data.toString());
    } catch (err) {
      if (err instanceof BadMessage) return this.#send({ t: 'error', code: 'bad_message', message: err.message });
      throw err;
    }
    if (msg.t === 'ack') {
      this.#unacked = Math.max(0, this.#unacked - 1);
      return this.#pump();
    }
    if (this.#o.grant.mode !== 'interactive') {
      this.stats.refused++;
      return this.#send({ t: 'error', code: 'view_only', message: 'This live view link is view-only' });
    }
    this.#queueInput(msg);
  }

  #queueInput(input: ViewerInput): void {
    const max = this.#o.maxQueuedInput ?? 64;
    if (this.#inputQueue.length >= max) {
      // The browser takes input slower than it comes: keep presses, keys and tab actions, drop the rest.
      this.#inputQueue = this.#inputQueue.filter((i) => !isCoalescable(i));
      if (isCoalescable(input) || this.#inputQueue.length >= max) return;
    }
    this.#inputQueue.push(input);
    if (!this.#inputRunning) void this.#drainInput();
  }

  async #drainInput(): Promise<void> {
    this.#inputRunning = true;
    try {
      for (let input = this.#inputQueue.shift(); input && !this.#closed; input = this.#inputQueue.shift()) {
        try {
          await this.#o.source.dispatchInput(toDispatchInput(this.#o.grant.projectId, this.#o.browserId, input));
          this.stats.inputs++;
        } catch (err) {
          this.#inputFailed(input, err);
        }
      }
    } finally {
      this.#inputRunning = false;
    }
  }

  #inputFailed(input: ViewerInput, err: unknown): void {
    const code = err instanceof AppError ? err.code : Status.INTERNAL;
    const shown = err instanceof RemoteError ? err.publicMessage : err instanceof AppError ? err.message : undefined;
    this.#o.logger.debug({ browserId: this.#o.browserId, input: input.t, code }, 'input not delivered');
    // What a person can act on (a bad URL, a stopped browser); moves failing silently are fine.
    if (!isCoalescable(input)) this.#send({ t: 'error', code: 'input_failed', message: shown ?? 'The browser did not take the input' });
  }
}
