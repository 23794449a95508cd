import { GrpcServer, implement, type InternalToken } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { RunServiceService } from '../../../gen/ats/run/v1/run.js';
import { runHandlers } from './run.handlers.js';
import type { Runs } from './runs.js';

export interface RunServerDeps {
  logger: Logger;
  runs: Runs;
  /** The deployment's internal token, required of every caller. */
  token: InternalToken;
}

/** Builds the run service's gRPC server (does not listen). */
export function createRunServer(deps: RunServerDeps): GrpcServer {
  return new GrpcServer([{ definition: RunServiceService, implementation: implement(RunServiceService, runHandlers(deps.runs), deps.logger) }], deps.token);
}
