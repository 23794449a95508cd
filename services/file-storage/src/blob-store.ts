/**
 * Immutable blobs by id. `put` streams into a temporary file and renames it into place only when
 * it is complete and within the cap, so a failed or partial write never becomes visible. The
 * interface is narrow enough for an S3-compatible store (put = multipart upload + complete).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BackgroundHasher } from './hasher.js';

/** A body grew past the cap. */
export class TooLargeError extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(`Upload is larger than the limit of ${limit} bytes`);
    this.name = this.constructor.name;
    this.limit = limit;
  }
}

export interface StoredBlob {
  id: string;
  sizeBytes: number;
  sha256: string;
}

export interface BlobStore {
  /** Stores the stream as a new blob; throws TooLargeError past `maxBytes` (nothing is kept). */
  put(body: Readable, maxBytes: number): Promise<StoredBlob>;
  /** Size of a blob, or undefined when missing. */
  size(id: string): Promise<number | undefined>;
  /** A stream of a blob's bytes [start, end] (inclusive), or undefined when missing. */
  read(id: string, range?: { start: number; end: number }): Promise<Readable | undefined>;
  delete(id: string): Promise<void>;
  /** Every stored blob's id (for garbage collection). */
  list(): Promise<string[]>;
}

export function newBlobId(): string {
  return `blb_${randomBytes(16).toString('hex')}`;
}

const BLOB_ID = /^blb_[0-9a-f]{32}$/;

/** Blobs as files under a root directory, sharded by id; temporaries in `<root>/.tmp`. */
export class LocalBlobStore implements BlobStore {
  readonly root: string;
  readonly #tmp: string;
  readonly #hasher = new BackgroundHasher();

  constructor(root: string) {
    this.root = root;
    this.#tmp = path.join(root, '.tmp');
    fs.mkdirSync(this.#tmp, { recursive: true });
  }

  /** Removes temporaries a crashed predecessor left behind. */
  async sweepTemporaries(): Promise<number> {
    const names = await fsp.readdir(this.#tmp);
    await Promise.all(names.map((n) => fsp.rm(path.join(this.#tmp, n), { force: true })));
    return names.length;
  }

  pathOf(id: string): string {
    if (!BLOB_ID.test(id)) throw new Error(`invalid blob id ${id}`);
    return path.join(this.root, id.slice(4, 6), id);
  }

  async put(body: Readable, maxBytes: number): Promise<StoredBlob> {
    const id = newBlobId();
    const tmp = path.join(this.#tmp, `${id}.part`);
    const hash = this.#hasher.start();
    let size = 0;
    const meter = new Transform({
      highWaterMark: 1 << 20, // like the file stream: fewer pauses of the socket
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        if (size > maxBytes) return cb(new TooLargeError(maxBytes));
        hash.update(chunk);
        return cb(null, chunk);
      },
    });
    let sha256: string;
    try {
      await pipeline(body, meter, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600, highWaterMark: 1 << 20 }));
      sha256 = await hash.digest();
      const final = this.pathOf(id);
      await fsp.mkdir(path.dirname(final), { recursive: true });
      await fsp.rename(tmp, final);
    } catch (err) {
      hash.discard();
      await fsp.rm(tmp, { force: true });
      throw err;
    }
    return { id, sizeBytes: size, sha256 };
  }

  async size(id: string): Promise<number | undefined> {
    const st = await fsp.stat(this.pathOf(id)).catch(() => undefined);
    return st?.size;
  }

  async read(id: string, range?: { start: number; end: number }): Promise<Readable | undefined> {
    const handle = await fsp.open(this.pathOf(id), 'r').catch(() => undefined);
    if (!handle) return undefined;
    return handle.createReadStream({ ...(range ?? {}), highWaterMark: 1 << 20, autoClose: true });
  }

  async delete(id: string): Promise<void> {
    await fsp.rm(this.pathOf(id), { force: true });
  }

  async list(): Promise<string[]> {
    const ids: string[] = [];
    for (const shard of await fsp.readdir(this.root)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of await fsp.readdir(path.join(this.root, shard)).catch(() => [])) if (BLOB_ID.test(name)) ids.push(name);
    }
    return ids;
  }
}
