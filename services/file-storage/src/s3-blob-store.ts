/**
 * Blobs as objects `<prefix><blob id>` in an S3-compatible bucket: the scale-out store, shared by
 * every replica. Bytes stream both ways; an upload holds at most `queueSize + 1` parts in memory.
 * A put that fails (too large, cut off, refused) aborts its multipart upload, so nothing of it is
 * kept; uploads a crashed process left are aborted by the next start's sweep once they are stale.
 */
import http from 'node:http';
import https from 'node:https';
import { pipeline, Transform, type Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  S3Client,
  paginateListObjectsV2,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { STALE_LEFTOVER_MS, isBlobId, meteredHash, newBlobId, type BlobStore, type StoredBlob, type Swept } from './blob-store.js';
import { BackgroundHasher } from './hasher.js';

/** Where the bucket is and how to reach it (the S3_* variables). */
export interface S3Settings {
  bucket: string;
  /** An S3-compatible endpoint (MinIO, Ceph, R2 …); unset = AWS for `region`. */
  endpoint?: string | undefined;
  region: string;
  /** Both or neither; neither = the SDK's default chain (environment, profile, IAM role). */
  accessKeyId?: string | undefined;
  secretAccessKey?: string | undefined;
  forcePathStyle: boolean;
  /** Prepended to every key, e.g. `files/`. */
  prefix: string;
}

export interface S3BlobStoreOptions {
  /** Size of a multipart upload's parts (S3's minimum is 5 MiB); smaller bodies are one PutObject. */
  partSizeBytes?: number;
  /** Parts of one upload sent at once. */
  queueSize?: number;
  /** Keys asked for per ListObjectsV2 / ListMultipartUploads page (S3's maximum is 1000). */
  pageSize?: number;
}

/** A client for `settings`: keep-alive connections, and checksums only where S3 requires them. */
export function createS3Client(settings: S3Settings): S3Client {
  const agent = { keepAlive: true, maxSockets: 128 };
  return new S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    ...(settings.accessKeyId && settings.secretAccessKey ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey } } : {}),
    // The SDK's default CRC trailers (aws-chunked bodies) are not spoken by every S3-compatible
    // store; the service hashes every blob itself (sha256) anyway.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: { httpAgent: new http.Agent(agent), httpsAgent: new https.Agent(agent), connectionTimeout: 5000 },
  });
}

/** The SDK's "no such object" (GetObject: NoSuchKey; HeadObject, which has no body: NotFound). */
function missing(err: unknown): boolean {
  const name = (err as { name?: string }).name;
  return name === 'NoSuchKey' || name === 'NotFound';
}

/**
 * The asked range of a ranged GET's body. Some S3-compatible servers answer with more than was
 * asked (s3rver serves `bytes=0-0` whole, saying so in Content-Range); the rest is dropped.
 */
function exactRange(body: Readable, asked: { start: number; end: number }, contentRange: string | undefined): Readable {
  const m = /^bytes (\d+)-(\d+)\//.exec(contentRange ?? '');
  const from = m ? Number(m[1]) : 0;
  if (m && from === asked.start && Number(m[2]) === asked.end) return body;
  if (from > asked.start) throw new Error(`the store answered bytes ${from}- for bytes=${asked.start}-${asked.end}`);
  let skip = asked.start - from;
  let left = asked.end - asked.start + 1;
  const trim = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      const drop = Math.min(skip, chunk.length);
      skip -= drop;
      const keep = chunk.subarray(drop, drop + left);
      if (left > 0 && keep.length) {
        left -= keep.length;
        this.push(keep);
        if (left === 0) this.push(null);
      }
      cb();
    },
  });
  return pipeline(body, trim, () => undefined);
}

export class S3BlobStore implements BlobStore {
  readonly bucket: string;
  readonly prefix: string;
  readonly #client: S3Client;
  readonly #partSize: number;
  readonly #queueSize: number;
  readonly #pageSize: number;
  readonly #hasher = new BackgroundHasher();
  #stopped = false;

  constructor(settings: S3Settings, options: S3BlobStoreOptions = {}) {
    this.bucket = settings.bucket;
    this.prefix = settings.prefix;
    this.#client = createS3Client(settings);
    this.#partSize = options.partSizeBytes ?? 8 * 1024 * 1024;
    this.#queueSize = options.queueSize ?? 2;
    this.#pageSize = options.pageSize ?? 1000;
  }

  keyOf(id: string): string {
    if (!isBlobId(id)) throw new Error(`invalid blob id ${id}`);
    return `${this.prefix}${id}`;
  }

  /** The blob id a key under the prefix names; undefined for any other key (not the store's). */
  #idOf(key: string | undefined): string | undefined {
    const id = key?.startsWith(this.prefix) ? key.slice(this.prefix.length) : undefined;
    return id !== undefined && isBlobId(id) ? id : undefined;
  }

  /** Throws unless the bucket answers with these settings (called at start: a typo fails early). */
  async check(): Promise<void> {
    await this.#client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  async put(body: Readable, maxBytes: number): Promise<StoredBlob> {
    const id = newBlobId();
    const hash = this.#hasher.start();
    const { meter, size } = meteredHash(maxBytes, hash);
    let failure: Error | undefined;
    meter.once('error', (err) => (failure ??= err));
    // The callback form hands back `meter` as the body; a failure on either side destroys both.
    const source = pipeline(body, meter, () => undefined);
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.bucket, Key: this.keyOf(id), Body: source, ContentType: 'application/octet-stream' },
      partSize: this.#partSize,
      queueSize: this.#queueSize,
      leavePartsOnError: false, // a failed upload aborts its multipart upload
    });
    let sha256: string;
    try {
      await upload.done();
      sha256 = await hash.digest().catch(async (err: unknown) => {
        await this.delete(id);
        throw err;
      });
    } catch (err) {
      hash.discard();
      source.destroy();
      // The body's own error (TooLargeError, a cut-off request) rather than what the SDK made of it,
      // or the error of an abort that failed too (the sweep takes that upload later).
      throw failure ?? err;
    }
    return { id, sizeBytes: size(), sha256 };
  }

  async size(id: string): Promise<number | undefined> {
    try {
      const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.keyOf(id) }));
      return head.ContentLength ?? 0;
    } catch (err) {
      if (missing(err)) return undefined;
      throw err;
    }
  }

  async read(id: string, range?: { start: number; end: number }): Promise<Readable | undefined> {
    try {
      const got = await this.#client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.keyOf(id), ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
      return range ? exactRange(got.Body as Readable, range, got.ContentRange) : (got.Body as Readable);
    } catch (err) {
      if (missing(err)) return undefined;
      throw err;
    }
  }

  async delete(id: string): Promise<void> {
    await this.#client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keyOf(id) }));
  }

  /** Every blob under the prefix; other keys there (not blob ids) are not the store's. */
  async list(): Promise<string[]> {
    const ids: string[] = [];
    const pages = paginateListObjectsV2({ client: this.#client, pageSize: this.#pageSize }, { Bucket: this.bucket, ...(this.prefix ? { Prefix: this.prefix } : {}) });
    for await (const page of pages) {
      for (const o of page.Contents ?? []) {
        const id = this.#idOf(o.Key);
        if (id) ids.push(id);
      }
    }
    return ids;
  }

  /** Incomplete multipart uploads of blobs under the prefix, oldest first per key. */
  async *pendingUploads(): AsyncGenerator<{ key: string; uploadId: string; initiated: Date }> {
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    for (;;) {
      const page = await this.#client.send(
        new ListMultipartUploadsCommand({ Bucket: this.bucket, MaxUploads: this.#pageSize, ...(this.prefix ? { Prefix: this.prefix } : {}), ...(KeyMarker ? { KeyMarker, UploadIdMarker } : {}) }),
      );
      for (const u of page.Uploads ?? []) {
        if (u.Key && u.UploadId && this.#idOf(u.Key)) yield { key: u.Key, uploadId: u.UploadId, initiated: u.Initiated ?? new Date(0) };
      }
      if (!page.IsTruncated || !page.NextKeyMarker) return;
      KeyMarker = page.NextKeyMarker;
      UploadIdMarker = page.NextUploadIdMarker;
    }
  }

  /**
   * Aborts incomplete uploads older than `staleMs`. A failed put aborts its own at once; these are
   * a crashed process's, and S3 cannot tell which replica began one, so `own` is always 0.
   */
  async sweep(staleMs = STALE_LEFTOVER_MS, now = Date.now()): Promise<Swept> {
    const stale: { key: string; uploadId: string }[] = [];
    for await (const u of this.pendingUploads()) if (u.initiated.getTime() <= now - staleMs) stale.push(u);
    for (const u of stale) await this.#client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.key, UploadId: u.uploadId }));
    return { own: 0, stale: stale.length };
  }

  /** Closes the client's connections and the hash worker. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#client.destroy();
    await this.#hasher.close();
  }
}
