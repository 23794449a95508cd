import { GrpcServer, implement, type InternalToken } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { BrowserPoolServiceService } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { browserPoolHandlers } from './browser-pool.handlers.js';
import type { BrowserPool } from './browser-pool.js';
import type { OwnerRouter } from './owner-routing.js';
import type { Profiles } from './profiles.js';

/** What the gRPC server is built from. */
export interface BrowserPoolServerDeps {
  logger: Logger;
  pool: BrowserPool;
  profiles: Profiles;
  /** Sends calls about other replicas' browsers to their owners. */
  router: OwnerRouter;
  /** The deployment's internal token, required of every caller. */
  token: InternalToken;
}

/** Builds the browser-pool service's gRPC server (does not listen). */
export function createBrowserPoolServer(deps: BrowserPoolServerDeps): GrpcServer {
  return new GrpcServer([
    {
      definition: BrowserPoolServiceService,
      implementation: implement(BrowserPoolServiceService, browserPoolHandlers(deps.pool, deps.profiles, deps.router), deps.logger),
    },
  ], deps.token);
}
