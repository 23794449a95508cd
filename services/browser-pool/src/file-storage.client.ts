/** Downloads kept as file-storage objects: streamed in with PutObject, handed out as signed links. */
import type { Readable } from 'node:stream';
import { createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import { FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';
import type { DownloadStore } from './downloads.js';

const CHUNK = 512 * 1024;

export interface FileStorageDownloadStore extends DownloadStore {
  close(): void;
}

/** A DownloadStore on the file-storage service; every call carries a deadline. */
export function fileStorageDownloadStore(address: string, deadlineMs: number, token: InternalToken, putDeadlineMs = 120000): FileStorageDownloadStore {
  const client: ServiceClient<typeof FileStorageServiceService> = createServiceClient(FileStorageServiceService, address, deadlineMs, token);
  return {
    async put(projectId, key, contentType, body: Readable) {
      const { stream, response } = client.api.putObject({ deadlineMs: putDeadlineMs });
      const write = (msg: object) => (stream.write(msg) ? Promise.resolve() : new Promise<void>((r) => stream.once('drain', () => r())));
      try {
        await write({ header: { projectId, key, contentType } });
        for await (const data of body) {
          const buf = data as Buffer;
          for (let i = 0; i < buf.length; i += CHUNK) await write({ chunk: buf.subarray(i, i + CHUNK) });
        }
        stream.end();
      } catch (err) {
        stream.cancel();
        body.destroy();
        await response.catch(() => {});
        throw err;
      }
      await response;
    },
    async sign(projectId, key, filename, ttlSeconds) {
      return (await client.api.signObjectUrl({ projectId, key, ttlSeconds, downloadFilename: filename })).url;
    },
    close: () => client.close(),
  };
}
