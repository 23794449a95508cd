/** gRPC clients of the services the run service calls. */
import { createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import { BrowserPoolServiceService } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';

export interface RunClients {
  browserPool: ServiceClient<typeof BrowserPoolServiceService>;
  fileStorage: ServiceClient<typeof FileStorageServiceService>;
}

export function createRunClients(a: { browserPoolAddr: string; fileStorageAddr: string; grpcDeadlineMs: number }, token: InternalToken): RunClients {
  return {
    browserPool: createServiceClient(BrowserPoolServiceService, a.browserPoolAddr, a.grpcDeadlineMs, token),
    fileStorage: createServiceClient(FileStorageServiceService, a.fileStorageAddr, a.grpcDeadlineMs, token),
  };
}

export function closeRunClients(c: RunClients): void {
  c.browserPool.close();
  c.fileStorage.close();
}
