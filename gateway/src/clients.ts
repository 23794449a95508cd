/** One promise client per downstream service; every unary call carries a deadline. */
import { createServiceClient, serviceName, type InternalToken, type ServiceClient } from '../../services/common/src/grpc.js';
import { RunServiceService } from '../../gen/ats/run/v1/run.js';
import { BrowserPoolServiceService } from '../../gen/ats/browserpool/v1/browser_pool.js';
import { FileStorageServiceService } from '../../gen/ats/filestorage/v1/file_storage.js';
import { LiveViewServiceService } from '../../gen/ats/liveview/v1/live_view.js';
import { WebhooksServiceService } from '../../gen/ats/webhooks/v1/webhooks.js';

export interface Clients {
  run: ServiceClient<typeof RunServiceService>;
  browserPool: ServiceClient<typeof BrowserPoolServiceService>;
  fileStorage: ServiceClient<typeof FileStorageServiceService>;
  liveView: ServiceClient<typeof LiveViewServiceService>;
  webhooks: ServiceClient<typeof WebhooksServiceService>;
}

export interface ClientAddresses {
  runAddr: string;
  browserPoolAddr: string;
  fileStorageAddr: string;
  liveViewAddr: string;
  webhooksAddr: string;
  grpcDeadlineMs: number;
}

/** The full gRPC service names, as their health services report them. */
export const SERVICE_NAMES: Record<keyof Clients, string> = {
  run: serviceName(RunServiceService),
  browserPool: serviceName(BrowserPoolServiceService),
  fileStorage: serviceName(FileStorageServiceService),
  liveView: serviceName(LiveViewServiceService),
  webhooks: serviceName(WebhooksServiceService),
};

/** The clients; each call carries the deployment's internal token. */
export function createClients(a: ClientAddresses, token: InternalToken): Clients {
  return {
    run: createServiceClient(RunServiceService, a.runAddr, a.grpcDeadlineMs, token),
    browserPool: createServiceClient(BrowserPoolServiceService, a.browserPoolAddr, a.grpcDeadlineMs, token),
    fileStorage: createServiceClient(FileStorageServiceService, a.fileStorageAddr, a.grpcDeadlineMs, token),
    liveView: createServiceClient(LiveViewServiceService, a.liveViewAddr, a.grpcDeadlineMs, token),
    webhooks: createServiceClient(WebhooksServiceService, a.webhooksAddr, a.grpcDeadlineMs, token),
  };
}

export function closeClients(c: Clients): void {
  for (const client of Object.values(c)) client.close();
}
