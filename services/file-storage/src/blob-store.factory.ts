/** Builds the configured blob store, checks it and sweeps what interrupted writes left. */
import type { Logger } from '../../common/src/logger.js';
import { LocalBlobStore, type BlobStore } from './blob-store.js';
import type { BlobStoreConfig } from './config.js';

/** What the start log says about a store: where the bytes are, never a credential. */
export function describeBlobStore(c: BlobStoreConfig): Record<string, string | boolean> {
  if (c.kind === 'local') return { blobStore: 'local', dir: c.dir, instance: c.instance };
  let endpoint = `AWS S3 (${c.region})`;
  if (c.endpoint) {
    const u = new URL(c.endpoint);
    u.username = '';
    u.password = '';
    endpoint = u.toString();
  }
  return { blobStore: 's3', bucket: c.bucket, prefix: c.prefix, endpoint, region: c.region, forcePathStyle: c.forcePathStyle, credentials: c.accessKeyId ? 'S3_ACCESS_KEY_ID' : 'the SDK default chain' };
}

/** The running store and its `stop()`. */
export interface OpenBlobStore {
  store: BlobStore;
  stop(): Promise<void>;
}

/**
 * Opens the store of `c`. An S3 bucket that does not answer stops the start with a message naming
 * it. Then this instance's leftovers, and anyone's older than a day, are removed.
 */
export async function openBlobStore(c: BlobStoreConfig, logger: Logger): Promise<OpenBlobStore> {
  const where = describeBlobStore(c);
  logger.info(where, 'blob store');
  if (c.kind === 'local') {
    const store = new LocalBlobStore(c.dir, { instance: c.instance });
    const swept = await store.sweep();
    if (swept.own || swept.stale) logger.info(swept, 'removed partial uploads left by earlier processes');
    return { store, stop: async () => undefined };
  }
  // Loaded only for a bucket: the AWS SDK is the heaviest module here (≈ 150 ms of CPU to load), and a local store never needs it.
  const { S3BlobStore } = await import('./s3-blob-store.js');
  const store = new S3BlobStore(c);
  try {
    await store.check();
  } catch (err) {
    await store.stop();
    const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
    const status = e.$metadata?.httpStatusCode ? ` (HTTP ${e.$metadata.httpStatusCode})` : '';
    throw new Error(`S3 bucket ${JSON.stringify(c.bucket)} at ${where.endpoint} does not answer${status}: ${e.name ?? 'Error'}: ${e.message ?? ''}`, { cause: err });
  }
  // A store without ListMultipartUploads still serves; a bucket lifecycle rule can do this instead.
  const swept = await store.sweep().catch((err: Error) => logger.warn({ err: err.message }, 'could not look for abandoned multipart uploads'));
  if (swept?.stale) logger.info(swept, 'aborted multipart uploads abandoned for over a day');
  return { store, stop: () => store.stop() };
}
