/**
 * One StreamFrames subscription to the pool that survives hiccups: when the stream ends or
 * fails, the pool is asked whether the browser is still active; if it is, the stream is opened
 * again (with backoff), otherwise the feed reports the end (stopped, with its time, or unknown).
 */
import type * as grpc from '@grpc/grpc-js';
import { RemoteError, Status, fromServiceError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import type { StreamFramesResponse } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { isActive, type FramePurpose, type FrameSource } from './pool-client.js';

export type FeedEnd = { reason: 'stopped'; stoppedAtMs: number | undefined } | { reason: 'not_found' };

export interface FeedListener {
  frame(message: StreamFramesResponse): void;
  /** The browser will send no more frames. Called once. */
  ended(end: FeedEnd): void;
}

export interface FrameFeedOptions {
  source: FrameSource;
  projectId: string;
  browserId: string;
  purpose: FramePurpose;
  listener: FeedListener;
  logger: Logger;
  retryMinMs?: number;
  retryMaxMs?: number;
}

export class FrameFeed {
  readonly #o: FrameFeedOptions;
  #call: grpc.ClientReadableStream<StreamFramesResponse> | undefined;
  #retryMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: FrameFeedOptions) {
    this.#o = options;
    this.#retryMs = options.retryMinMs ?? 250;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  start(): this {
    this.#open();
    return this;
  }

  #open(): void {
    if (this.#stopped) return;
    const call = this.#o.source.streamFrames(this.#o.projectId, this.#o.browserId, this.#o.purpose);
    this.#call = call;
    let closed = false;
    const close = (err: unknown) => {
      if (closed) return;
      closed = true;
      void this.#closed(call, err);
    };
    call.on('data', (m: StreamFramesResponse) => {
      if (this.#call !== call || this.#stopped) return;
      this.#retryMs = this.#o.retryMinMs ?? 250;
      this.#o.listener.frame(m);
    });
    call.on('error', (err) => close(err));
    call.on('end', () => close(undefined));
  }

  async #closed(call: grpc.ClientReadableStream<StreamFramesResponse>, err: unknown): Promise<void> {
    if (this.#call !== call || this.#stopped) return;
    this.#call = undefined;
    const remote = err === undefined ? undefined : fromServiceError(err);
    if (remote?.code === Status.NOT_FOUND) return this.#end({ reason: 'not_found' });
    if (remote) this.#o.logger.debug({ browserId: this.#o.browserId, code: remote.code, err: remote.message }, 'frame stream failed');
    try {
      const b = await this.#o.source.getBrowser(this.#o.projectId, this.#o.browserId);
      if (this.#stopped) return;
      if (!b) return this.#end({ reason: 'not_found' });
      if (!isActive(b)) return this.#end({ reason: 'stopped', stoppedAtMs: b.stoppedAt ? Date.parse(b.stoppedAt) : undefined });
    } catch (e) {
      this.#o.logger.debug({ browserId: this.#o.browserId, code: e instanceof RemoteError ? e.code : undefined, err: e }, 'pool not reachable; retrying the frame stream');
    }
    this.#retry();
  }

  #retry(): void {
    if (this.#stopped) return;
    const wait = this.#retryMs;
    this.#retryMs = Math.min(this.#retryMs * 2, this.#o.retryMaxMs ?? 5000);
    this.#timer = setTimeout(() => this.#open(), wait);
  }

  #end(end: FeedEnd): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#o.listener.ended(end);
  }

  /** Cancels the stream; no more callbacks. Idempotent. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const call = this.#call;
    this.#call = undefined;
    call?.cancel();
  }
}
