import { GrpcServer, implement, type InternalToken } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';
import { fileStorageHandlers } from './file-storage.handlers.js';
import type { FileStorage } from './file-storage.js';

export interface FileStorageServerDeps {
  logger: Logger;
  files: FileStorage;
  /** The deployment's internal token, required of every caller. */
  token: InternalToken;
}

/** Builds the file-storage service's gRPC server (does not listen). */
export function createFileStorageServer(deps: FileStorageServerDeps): GrpcServer {
  return new GrpcServer([
    { definition: FileStorageServiceService, implementation: implement(FileStorageServiceService, fileStorageHandlers(deps.files), deps.logger) },
  ], deps.token);
}
