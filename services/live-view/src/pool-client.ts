/**
 * What live view needs from the browser pool: frames (a server stream), input, and whether a
 * browser is still active. A frame stream says its purpose (`viewers` or `recording`; the latter
 * as StreamFramesRequest.passive) so the pool can tell a person watching from the recorder, which
 * watches every browser for its whole life and must not keep it from being stopped as idle.
 */
import * as grpc from '@grpc/grpc-js';
import { RemoteError, Status } from '../../common/src/errors.js';
import { CHANNEL_OPTIONS, callMetadata, createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import {
  BrowserPoolServiceService,
  BrowserStatus,
  type Browser,
  type DispatchInputRequest,
  type StreamFramesResponse,
} from '../../../gen/ats/browserpool/v1/browser_pool.js';

export type FramePurpose = 'viewers' | 'recording';

/** The part of the pool live view uses; tests substitute it. */
export interface FrameSource {
  streamFrames(projectId: string, browserId: string, purpose: FramePurpose): grpc.ClientReadableStream<StreamFramesResponse>;
  /** The browser, or undefined when the pool does not know it (in this project). */
  getBrowser(projectId: string, browserId: string): Promise<Browser | undefined>;
  dispatchInput(req: DispatchInputRequest): Promise<void>;
  /** One page of the browsers of every project that are active or stopped since `stoppedSince` (ISO-8601). */
  listRecordable(stoppedSince: string, cursor: string): Promise<{ items: Browser[]; nextCursor: string }>;
  close(): void;
}

export function isActive(b: Browser | undefined): boolean {
  return b?.status === BrowserStatus.BROWSER_STATUS_ACTIVE;
}

/** A FrameSource over gRPC; unary calls carry the deadline, streams last as long as the browser. */
export function createPoolClient(address: string, deadlineMs: number, token: InternalToken): FrameSource {
  const unary: ServiceClient<typeof BrowserPoolServiceService> = createServiceClient(BrowserPoolServiceService, address, deadlineMs, token);
  const streams = new grpc.Client(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  const def = BrowserPoolServiceService.streamFrames;
  return {
    streamFrames(projectId, browserId, purpose) {
      return streams.makeServerStreamRequest(
        def.path,
        (v: Parameters<typeof def.requestSerialize>[0]) => def.requestSerialize(v),
        (b: Buffer) => def.responseDeserialize(b),
        { projectId, browserId, passive: purpose === 'recording' },
        callMetadata(token),
        {},
      );
    },
    async getBrowser(projectId, browserId) {
      try {
        return (await unary.api.getBrowser({ projectId, browserId })).browser;
      } catch (err) {
        if (err instanceof RemoteError && err.code === Status.NOT_FOUND) return undefined;
        throw err;
      }
    },
    async dispatchInput(req) {
      await unary.api.dispatchInput(req);
    },
    async listRecordable(stoppedSince, cursor) {
      const res = await unary.api.listRecordableBrowsers({ stoppedSince, limit: 0, cursor });
      return { items: res.items, nextCursor: res.nextCursor };
    },
    close() {
      unary.close();
      streams.close();
    },
  };
}
