import { GrpcServer, implement, type InternalToken } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { WebhooksServiceService } from '../../../gen/ats/webhooks/v1/webhooks.js';
import { webhooksHandlers } from './webhooks.handlers.js';
import type { Webhooks } from './webhooks.js';

/** Builds the webhooks service's gRPC server (does not listen). */
export function createWebhooksServer(deps: { logger: Logger; webhooks: Webhooks; token: InternalToken }): GrpcServer {
  return new GrpcServer([{ definition: WebhooksServiceService, implementation: implement(WebhooksServiceService, webhooksHandlers(deps.webhooks), deps.logger) }], deps.token);
}
