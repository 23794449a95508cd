import { GrpcServer, implement, type InternalToken } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { LiveViewServiceService } from '../../../gen/ats/liveview/v1/live_view.js';
import { liveViewHandlers, type LiveViewHandlerDeps } from './live-view.handlers.js';

export interface LiveViewServerDeps extends LiveViewHandlerDeps {
  logger: Logger;
  /** The deployment's internal token, required of every caller. */
  token: InternalToken;
}

/** Builds the live-view service's gRPC server (does not listen). */
export function createLiveViewServer(deps: LiveViewServerDeps): GrpcServer {
  return new GrpcServer([{ definition: LiveViewServiceService, implementation: implement(LiveViewServiceService, liveViewHandlers(deps), deps.logger) }], deps.token);
}
