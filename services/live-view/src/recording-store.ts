/**
 * Recordings in file-storage: finished parts and the MP4 are stored as objects (PutObject), parts
 * fetched back by whichever replica finalises (GetObject) and removed once the MP4 is stored; the
 * MP4 is handed out as presigned links.
 */
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { fromServiceError } from '../../common/src/errors.js';
import { createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import { FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';

const CHUNK = 1024 * 1024;

export interface RecordingStore {
  /** Uploads a file as the object `key` of the project (replacing it). */
  put(projectId: string, key: string, file: string, contentType?: string): Promise<{ sizeBytes: number }>;
  /** Downloads the object `key` into `file`; rejects (NOT_FOUND) when there is none. */
  get(projectId: string, key: string, file: string): Promise<void>;
  /** Removes the object `key`; false when there was none. */
  remove(projectId: string, key: string): Promise<boolean>;
  /** A presigned GET link of the object, served as `filename`. */
  link(projectId: string, key: string, ttlSeconds: number, filename: string): Promise<{ url: string; expiresAt: string }>;
  close(): void;
}

export function recordingKey(browserId: string): string {
  return `recordings/${browserId}.mp4`;
}

/** The name a recording is downloaded as. */
export function recordingFileName(browserId: string): string {
  return `recording-${browserId}.mp4`;
}

/** A part of a recording in progress; the writer's nonce keeps a fenced-out writer from overwriting its successor's part. */
export function partKey(browserId: string, seq: number, nonce: string): string {
  return `recordings/parts/${browserId}/${String(seq).padStart(5, '0')}-${nonce}.ts`;
}

export function createRecordingStore(address: string, deadlineMs: number, token: InternalToken): RecordingStore {
  const client: ServiceClient<typeof FileStorageServiceService> = createServiceClient(FileStorageServiceService, address, deadlineMs, token);
  return {
    async put(projectId, key, file, contentType = 'video/mp4') {
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
      await write({ header: { projectId, key, contentType } });
      for await (const chunk of fs.createReadStream(file, { highWaterMark: CHUNK })) {
        // Stop feeding a call that already ended (failed); its error is what we report.
        if (answered) break;
        await write({ chunk: chunk as Buffer });
      }
      stream.end();
      const res = await response;
      return { sizeBytes: res.sizeBytes };
    },
    async get(projectId, key, file) {
      // A minute per 64 MiB is ample on the cluster's network; parts are a few MiB.
      const call = client.api.getObject({ projectId, key }, { deadlineMs: 60000 });
      const chunks = Readable.from(
        (async function* () {
          try {
            for await (const m of call) yield (m as { chunk: Buffer }).chunk;
          } catch (err) {
            throw fromServiceError(err);
          }
        })(),
      );
      try {
        await pipeline(chunks, fs.createWriteStream(file));
      } finally {
        call.cancel(); // a write that failed does not leave the stream open (no-op once it ended)
      }
    },
    async remove(projectId, key) {
      return (await client.api.deleteObject({ projectId, key })).deleted;
    },
    async link(projectId, key, ttlSeconds, filename) {
      return client.api.signObjectUrl({ projectId, key, ttlSeconds, downloadFilename: filename });
    },
    close() {
      client.close();
    },
  };
}
