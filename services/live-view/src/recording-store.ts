/** Finished recordings in file-storage: stored as objects (PutObject), handed out as presigned links. */
import fs from 'node:fs';
import { createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import { FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';

const CHUNK = 1024 * 1024;

export interface RecordingStore {
  /** Uploads a file as the object `key` of the project (replacing it). */
  put(projectId: string, key: string, file: string): Promise<{ sizeBytes: number }>;
  /** A presigned GET link of the object, served as `filename`. */
  link(projectId: string, key: string, ttlSeconds: number, filename: string): Promise<{ url: string; expiresAt: string }>;
  close(): void;
}

export function recordingKey(browserId: string): string {
  return `recordings/${browserId}.mp4`;
}

export function createRecordingStore(address: string, deadlineMs: number, token: InternalToken): RecordingStore {
  const client: ServiceClient<typeof FileStorageServiceService> = createServiceClient(FileStorageServiceService, address, deadlineMs, token);
  return {
    async put(projectId, key, file) {
      const size = fs.statSync(file).size;
      // A minute plus a second per MiB: recordings can be large, the link to storage is local.
      const { stream, response } = client.api.putObject({ deadlineMs: 60000 + Math.ceil(size / CHUNK) * 1000 });
      let answered = false;
      response.then(
        () => (answered = true),
        () => (answered = true),
      );
      const write = (msg: Parameters<typeof stream.write>[0]) =>
        new Promise<void>((resolve) => {
          if (stream.write(msg)) resolve();
          else stream.once('drain', resolve);
        });
      await write({ header: { projectId, key, contentType: 'video/mp4' } });
      for await (const chunk of fs.createReadStream(file, { highWaterMark: CHUNK })) {
        // Stop feeding a call that already ended (failed); its error is what we report.
        if (answered) break;
        await write({ chunk: chunk as Buffer });
      }
      stream.end();
      const res = await response;
      return { sizeBytes: res.sizeBytes };
    },
    async link(projectId, key, ttlSeconds, filename) {
      return client.api.signObjectUrl({ projectId, key, ttlSeconds, downloadFilename: filename });
    },
    close() {
      client.close();
    },
  };
}
