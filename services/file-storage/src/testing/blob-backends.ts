/** The blob stores the file-storage tests run against: the local directory and S3 (a real s3rver). */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { LocalBlobStore, type BlobStore } from '../blob-store.js';
import { S3BlobStore } from '../s3-blob-store.js';
import { startS3Server } from './s3-server.js';

export type BackendName = 'local' | 's3';
export const BACKENDS: readonly BackendName[] = ['local', 's3'];

export interface BlobBackend {
  name: BackendName;
  store: BlobStore;
  /** Interrupted writes the store still holds: temporary files (local), incomplete multipart uploads (S3). */
  leftovers(): Promise<number>;
  close(): Promise<void>;
}

/** A store of kind `name` with its bytes under `dir` (S3: a new s3rver whose bucket lives there). */
export async function openBlobBackend(name: BackendName, dir: string): Promise<BlobBackend> {
  if (name === 'local') {
    const store = new LocalBlobStore(path.join(dir, 'blobs'), { instance: 'test' });
    return { name, store, leftovers: async () => (await fsp.readdir(store.temporaries)).length, close: async () => undefined };
  }
  const s3 = await startS3Server({ dir: path.join(dir, 's3') });
  const store = new S3BlobStore(s3.settings('blobs/'));
  return {
    name,
    store,
    async leftovers() {
      let n = 0;
      for await (const _ of store.pendingUploads()) n++;
      return n;
    },
    async close() {
      await store.stop();
      await s3.close();
    },
  };
}
