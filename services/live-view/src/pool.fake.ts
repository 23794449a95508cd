/**
 * A stand-in browser pool for tests, on real gRPC: one browser whose frames the test pushes,
 * whose state the test sets, and whose input is recorded. Not used by the service.
 */
import type * as grpc from '@grpc/grpc-js';
import { NotFoundError } from '../../common/src/errors.js';
import { GrpcServer, implement } from '../../common/src/grpc.js';
import { InternalToken } from '../../common/src/internal-token.js';
import type { Logger } from '../../common/src/logger.js';
import {
  Browser,
  BrowserPoolServiceService,
  BrowserStatus,
  type DispatchInputRequest,
  type StreamFramesRequest,
  type StreamFramesResponse,
} from '../../../gen/ats/browserpool/v1/browser_pool.js';

interface OpenStream {
  purpose: string;
  call: grpc.ServerWritableStream<StreamFramesRequest, StreamFramesResponse>;
  end: () => void;
}

export class FakePool {
  readonly projectId: string;
  readonly browserId: string;
  readonly streams: OpenStream[] = [];
  readonly inputs: DispatchInputRequest[] = [];
  status = BrowserStatus.BROWSER_STATUS_ACTIVE;
  stoppedAtMs: number | undefined;
  createdAtMs = Date.now();
  /** False: the browser is left out of ListRecordableBrowsers (only events tell of it). */
  listed = true;
  readonly server: GrpcServer;
  /** The credential the fake requires, as the real pool does. */
  readonly token = InternalToken.generate();

  constructor(projectId: string, browserId: string, logger: Logger) {
    this.projectId = projectId;
    this.browserId = browserId;
    const known = (r: { projectId: string; browserId: string }) => {
      if (r.browserId !== this.browserId || r.projectId !== this.projectId) throw new NotFoundError('Browser not found');
    };
    this.server = new GrpcServer([
      {
        definition: BrowserPoolServiceService,
        implementation: implement(
          BrowserPoolServiceService,
          {
            streamFrames: (req, call) => {
              known(req);
              return new Promise<void>((resolve) => {
                this.streams.push({ purpose: req.passive ? 'recording' : 'viewers', call, end: resolve });
                call.once('cancelled', () => resolve());
                if (this.status !== BrowserStatus.BROWSER_STATUS_ACTIVE) resolve();
              });
            },
            getBrowser: async (req) => {
              known(req);
              return { browser: this.browser() };
            },
            listRecordableBrowsers: async (req) => {
              const recent = this.status === BrowserStatus.BROWSER_STATUS_ACTIVE || (this.stoppedAtMs ?? 0) >= Date.parse(req.stoppedSince || '9999-01-01');
              return { items: this.listed && recent && (!req.cursor || req.cursor < this.browserId) ? [this.browser()] : [], nextCursor: '' };
            },
            dispatchInput: async (req) => {
              known(req);
              this.inputs.push(req);
              return {};
            },
          },
          logger,
        ),
      },
    ], this.token);
  }

  browser(): Browser {
    const stoppedAt = this.stoppedAtMs !== undefined ? new Date(this.stoppedAtMs).toISOString() : undefined;
    return Browser.fromPartial({ id: this.browserId, projectId: this.projectId, status: this.status, stoppedAt, createdAt: new Date(this.createdAtMs).toISOString(), screenWidth: 1280, screenHeight: 800 });
  }

  /** Streams still open, oldest first. */
  get openStreams(): OpenStream[] {
    return this.streams.filter((s) => !s.call.cancelled && !s.call.writableEnded);
  }

  /** Sends one message to every open stream (of one purpose, when given). */
  push(m: Partial<StreamFramesResponse>, purpose?: string): void {
    const full: StreamFramesResponse = { jpeg: Buffer.alloc(0), timestampMs: Date.now(), width: 1280, height: 800, url: 'https://example.com/', title: 'Example', tabs: [], ...m };
    for (const s of this.openStreams) if (!purpose || s.purpose === purpose) s.call.write(full);
  }

  /** The browser stops: every stream ends and GetBrowser says stopped (at `atMs`). */
  stop(atMs = Date.now()): void {
    this.status = BrowserStatus.BROWSER_STATUS_STOPPED;
    this.stoppedAtMs = atMs;
    for (const s of this.streams) s.end();
  }

  /** Active again (for the next test). */
  reset(): void {
    this.status = BrowserStatus.BROWSER_STATUS_ACTIVE;
    this.stoppedAtMs = undefined;
  }
}
