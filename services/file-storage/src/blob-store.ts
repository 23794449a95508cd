/**
 * Immutable blobs by id. `put` streams into a temporary file and renames it into place only when
 * it is complete and within the cap, so a failed or partial write never becomes visible. The
 * interface is narrow enough for an S3-compatible store (put = multipart upload + complete).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { INSTANCE_ID } from '../../common/src/config.js';
import type { HashJob } from './hasher.js';
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

/** What a start-up sweep removed: this instance's leftovers, and other instances' stale ones. */
export interface Swept {
  own: number;
  stale: number;
}

/** No upload takes this long: older leftovers of any instance are abandoned. */
export const STALE_LEFTOVER_MS = 24 * 3600_000;

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
  /**
   * Removes what interrupted writes left behind: everything this instance left (call it before
   * the instance stores anything) and other instances' leftovers older than `staleMs`.
   */
  sweep(staleMs?: number, now?: number): Promise<Swept>;
}

export function newBlobId(): string {
  return `blb_${randomBytes(16).toString('hex')}`;
}

const BLOB_ID = /^blb_[0-9a-f]{32}$/;

export function isBlobId(id: string): boolean {
  return BLOB_ID.test(id);
}

/**
 * A pass-through that counts and hashes the bytes of an upload and fails with TooLargeError
 * once more than `maxBytes` went through. `size()` is the count so far.
 */
export function meteredHash(maxBytes: number, hash: HashJob): { meter: Transform; size(): number } {
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
  return { meter, size: () => size };
}

export interface LocalBlobStoreOptions {
  /** Names this process's folder of temporaries, `<root>/.tmp/<instance>`; default the host name. */
  instance?: string;
}

/**
 * Blobs as files under a root directory, sharded by id. Temporaries live in a folder per
 * instance, `<root>/.tmp/<instance>`, so that replicas sharing the directory never sweep each
 * other's uploads in flight.
 */
export class LocalBlobStore implements BlobStore {
  readonly root: string;
  readonly instance: string;
  readonly #tmpRoot: string;
  readonly #tmp: string;
  readonly #hasher = new BackgroundHasher();

  constructor(root: string, options: LocalBlobStoreOptions = {}) {
    this.root = root;
    this.instance = options.instance ?? os.hostname();
    if (!INSTANCE_ID.test(this.instance)) throw new Error(`invalid instance name ${JSON.stringify(this.instance)}`);
    this.#tmpRoot = path.join(root, '.tmp');
    this.#tmp = path.join(this.#tmpRoot, this.instance);
    fs.mkdirSync(this.#tmp, { recursive: true, mode: 0o700 });
  }

  /** The folder of this instance's temporaries. */
  get temporaries(): string {
    return this.#tmp;
  }

  async sweep(staleMs = STALE_LEFTOVER_MS, now = Date.now()): Promise<Swept> {
    const own = await fsp.readdir(this.#tmp).catch(() => []);
    await Promise.all(own.map((n) => fsp.rm(path.join(this.#tmp, n), { force: true })));
    let stale = 0;
    const old = async (p: string) => ((await fsp.stat(p).catch(() => undefined))?.mtimeMs ?? now) <= now - staleMs;
    for (const entry of await fsp.readdir(this.#tmpRoot, { withFileTypes: true })) {
      const p = path.join(this.#tmpRoot, entry.name);
      if (entry.name === this.instance) continue;
      if (!entry.isDirectory()) {
        // A temporary of a version that kept them all in one folder.
        if (await old(p)) stale += await fsp.rm(p, { force: true }).then(() => 1);
        continue;
      }
      // Nothing was created or removed in it for that long: a replaced pod's. A live instance
      // idle that long re-creates it on its next upload.
      const idle = await old(p);
      for (const name of await fsp.readdir(p).catch(() => [])) {
        const file = path.join(p, name);
        if (await old(file)) stale += await fsp.rm(file, { force: true }).then(() => 1);
      }
      if (idle) await fsp.rmdir(p).catch(() => undefined);
    }
    return { own: own.length, stale };
  }

  pathOf(id: string): string {
    if (!BLOB_ID.test(id)) throw new Error(`invalid blob id ${id}`);
    return path.join(this.root, id.slice(4, 6), id);
  }

  async #createTemporary(file: string): Promise<fsp.FileHandle> {
    try {
      return await fsp.open(file, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      // Another instance's sweep removed this folder while this one was idle for a day.
      await fsp.mkdir(this.#tmp, { recursive: true, mode: 0o700 });
      return fsp.open(file, 'wx', 0o600);
    }
  }

  async put(body: Readable, maxBytes: number): Promise<StoredBlob> {
    const id = newBlobId();
    const tmp = path.join(this.#tmp, `${id}.part`);
    const hash = this.#hasher.start();
    const { meter, size } = meteredHash(maxBytes, hash);
    let sha256: string;
    try {
      const handle = await this.#createTemporary(tmp);
      await pipeline(body, meter, handle.createWriteStream({ highWaterMark: 1 << 20 }));
      sha256 = await hash.digest();
      const final = this.pathOf(id);
      await fsp.mkdir(path.dirname(final), { recursive: true });
      await fsp.rename(tmp, final);
    } catch (err) {
      hash.discard();
      await fsp.rm(tmp, { force: true });
      throw err;
    }
    return { id, sizeBytes: size(), sha256 };
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
