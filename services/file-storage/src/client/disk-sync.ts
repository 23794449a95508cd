/**
 * The worker side of a disk: materialise it into a local working directory over gRPC streams,
 * then sync what a process changed back (new and changed files become the run's output files,
 * deleted ones leave the disk). Works across hosts: only gRPC crosses between worker and storage.
 * Symlinks and other non-regular files an agent leaves are never followed or uploaded.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, DeadlineExceededError, fromServiceError, RemoteError, Status } from '../../../common/src/errors.js';
import type { ServiceClient } from '../../../common/src/grpc.js';
import type { DiskEntry, FileStorageServiceService } from '../../../../gen/ats/filestorage/v1/file_storage.js';
import { checkDiskPath, safeTarget } from '../names.js';

/** Where a file may be written under a disk root without following a link out of it (a worker writing onto a run's disk uses it too). */
export { safeTarget };

export type FileStorageClient = ServiceClient<typeof FileStorageServiceService>;

/** What the disk held when it was materialised: path → sha256. */
export type DiskManifest = Map<string, string>;

const STREAM_DEADLINE_MS = 10 * 60 * 1000;
const CHUNK = 256 * 1024;
const DEFAULT_STALL_MS = 30_000;

/** Bounds of a transfer: a stop, and how long it may go without progress. */
export interface TransferOptions {
  /** Ends the transfer (the call is cancelled) when aborted. */
  signal?: AbortSignal | undefined;
  /** Longest wait for the storage service to take or send the next piece; then the call is cancelled. */
  stallMs?: number | undefined;
}

/** `p`, unless `ms` pass or `signal` aborts first: then `onGiveUp` runs and its error is thrown. */
function bounded<T>(p: Promise<T>, ms: number, signal: AbortSignal | undefined, onGiveUp: (why: 'stalled' | 'aborted') => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const give = (why: 'stalled' | 'aborted') => {
      done();
      reject(onGiveUp(why));
    };
    const timer = setTimeout(() => give('stalled'), ms);
    const onAbort = () => give('aborted');
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    // Handled before an already aborted signal gives up: `p` rejects later (the call is cancelled), and unhandled that ended the process.
    p.then(
      (v) => {
        done();
        resolve(v);
      },
      (err: unknown) => {
        done();
        reject(err);
      },
    );
    if (signal?.aborted) give('aborted');
  });
}

/** The transfer's signal aborted (the run was stopped). */
export class TransferStopped extends Error {
  constructor() {
    super('The transfer was stopped');
    this.name = this.constructor.name;
  }
}

function stalledError(what: string, ms: number): DeadlineExceededError {
  return new DeadlineExceededError(`The file storage stopped answering while ${what} (nothing moved for ${ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`})`);
}
const NOFOLLOW_WRITE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW;

/** Writes every file of the disk into `dir` (created when missing); returns the manifest. */
export async function materializeDisk(client: FileStorageClient, projectId: string, diskId: string, dir: string, options: TransferOptions = {}): Promise<DiskManifest> {
  const stallMs = options.stallMs ?? DEFAULT_STALL_MS;
  await fsp.mkdir(dir, { recursive: true });
  const { entries } = await client.api.listDiskEntries({ projectId, diskId });
  const manifest: DiskManifest = new Map();
  for (const e of entries) {
    const target = await safeTarget(dir, e.path);
    // O_NOFOLLOW: a symlink planted at the target is refused, never written through.
    const handle = await fsp.open(target, NOFOLLOW_WRITE, 0o644);
    const call = client.api.readDiskFile({ projectId, diskId, path: e.path }, { deadlineMs: STREAM_DEADLINE_MS });
    const messages = call[Symbol.asyncIterator]();
    const bytes = Readable.from(
      (async function* () {
        try {
          for (;;) {
            const m = await bounded(messages.next(), stallMs, options.signal, (why) => {
              call.cancel();
              return why === 'stalled' ? stalledError(`sending ${e.path}`, stallMs) : new TransferStopped();
            });
            if (m.done) return;
            yield (m.value as { chunk: Buffer }).chunk;
          }
        } catch (err) {
          throw err instanceof AppError || err instanceof TransferStopped ? err : fromServiceError(err);
        }
      })(),
    );
    try {
      await pipeline(bytes, handle.createWriteStream({ highWaterMark: 1 << 20 }));
    } finally {
      call.cancel(); // a write that failed does not leave the stream open to its deadline (no-op once it ended)
    }
    const mtime = new Date(e.modifiedAt);
    await fsp.utimes(target, mtime, mtime);
    manifest.set(e.path, e.sha256);
  }
  return manifest;
}

/** Regular files under `dir` as disk paths; symlinks, sockets and invalid names are skipped. */
async function walk(dir: string, prefix = ''): Promise<{ diskPath: string; abs: string }[]> {
  const out: { diskPath: string; abs: string }[] = [];
  for (const d of await fsp.readdir(dir, { withFileTypes: true })) {
    const diskPath = prefix ? `${prefix}/${d.name}` : d.name;
    try {
      checkDiskPath(diskPath);
    } catch {
      continue;
    }
    const abs = path.join(dir, d.name);
    if (d.isDirectory()) out.push(...(await walk(abs, diskPath)));
    else if (d.isFile()) out.push({ diskPath, abs });
  }
  return out;
}

async function sha256Of(abs: string): Promise<string | undefined> {
  const handle = await fsp.open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW).catch(() => undefined);
  if (!handle) return undefined;
  const h = createHash('sha256');
  try {
    for await (const chunk of handle.createReadStream({ highWaterMark: 1 << 20, autoClose: false })) h.update(chunk as Buffer);
  } finally {
    await handle.close();
  }
  return h.digest('hex');
}

async function upload(client: FileStorageClient, header: { projectId: string; diskId: string; path: string; runId: string }, abs: string, options: TransferOptions): Promise<DiskEntry> {
  const stallMs = options.stallMs ?? DEFAULT_STALL_MS;
  const { stream, response } = client.api.writeDiskFile({ deadlineMs: STREAM_DEADLINE_MS });
  response.catch(() => {}); // awaited below; avoids an unhandled rejection while still writing
  let answered = false;
  response.then(
    () => (answered = true),
    () => (answered = true),
  );
  // When the service ends the call early (a file over the limit), no 'drain' ever comes: stop waiting then.
  const ended = response.then(
    () => Promise.reject(new Error('the storage service ended the upload early')),
    (err: unknown) => Promise.reject(err),
  );
  ended.catch(() => {});
  // A service that stops reading (stuck, or a peer that vanished without closing) must not hold the run.
  const giveUp = (why: 'stalled' | 'aborted') => (why === 'stalled' ? stalledError(`taking ${header.path}`, stallMs) : new TransferStopped());
  const write = async (msg: object) => {
    if (!stream.write(msg)) await bounded(Promise.race([once(stream, 'drain'), ended]), stallMs, options.signal, giveUp);
  };
  const handle = await fsp.open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    await write({ header: { ...header, contentType: '' } });
    for await (const chunk of handle.createReadStream({ highWaterMark: CHUNK, autoClose: false })) {
      if (answered) break; // refused mid-stream: what is left is not read, its answer says why
      await write({ chunk });
    }
    stream.end();
    const res = await bounded(response, stallMs, options.signal, giveUp);
    return res.entry!;
  } catch (err) {
    stream.cancel();
    // When the service ended the call (a file over the limit), its error says why.
    const remote = await response.then(
      () => undefined,
      (e: unknown) => e,
    );
    throw remote instanceof RemoteError && remote.code !== Status.CANCELLED ? remote : err;
  } finally {
    await handle.close();
  }
}

/** A changed file that could not be stored (over the size limit), and why. */
export interface SkippedFile {
  path: string;
  sha256: string;
  reason: string;
}

/** A bound on the output files of a run: `stored` are the paths it stored so far (added to as files are stored). */
export interface OutputFileCap {
  max: number;
  stored: Set<string>;
}

/**
 * Stores what changed in `dir` since `manifest` back onto the disk: new and modified files are
 * written as the run's output files; files gone from `dir` are deleted from the disk. A file
 * over the size limit is skipped (and reported), the others are still stored. With `cap`, a
 * file the run has not stored before is skipped once the run stored `cap.max` files (listed in
 * `overCap`, in path order); a file it stored before is still stored again when it changes.
 */
export async function syncDisk(
  client: FileStorageClient,
  projectId: string,
  diskId: string,
  runId: string,
  dir: string,
  manifest: DiskManifest,
  options: TransferOptions = {},
  cap?: OutputFileCap,
): Promise<{ written: DiskEntry[]; deleted: string[]; skipped: SkippedFile[]; overCap: SkippedFile[] }> {
  const present = (await walk(dir)).sort((a, b) => (a.diskPath < b.diskPath ? -1 : a.diskPath > b.diskPath ? 1 : 0));
  const written: DiskEntry[] = [];
  const skipped: SkippedFile[] = [];
  const overCap: SkippedFile[] = [];
  for (const f of present) {
    const sha = await sha256Of(f.abs);
    if (sha === undefined || manifest.get(f.diskPath) === sha) continue;
    if (cap && !cap.stored.has(f.diskPath) && cap.stored.size >= cap.max) {
      overCap.push({ path: f.diskPath, sha256: sha, reason: `the run reached its limit of ${cap.max} output files` });
      continue;
    }
    try {
      written.push(await upload(client, { projectId, diskId, path: f.diskPath, runId }, f.abs, options));
      cap?.stored.add(f.diskPath);
    } catch (err) {
      if (!(err instanceof RemoteError && err.code === Status.RESOURCE_EXHAUSTED)) throw err;
      skipped.push({ path: f.diskPath, sha256: sha, reason: err.publicMessage ?? err.message });
    }
  }
  const seen = new Set(present.map((f) => f.diskPath));
  const deleted: string[] = [];
  for (const p of manifest.keys()) {
    if (seen.has(p)) continue;
    // Only what the disk held (a file skipped for its size never reached it).
    if ((await client.api.deleteDiskFile({ projectId, diskId, path: p, runId })).deleted) deleted.push(p);
  }
  return { written: written.sort((a, b) => a.path.localeCompare(b.path)), deleted: deleted.sort(), skipped, overCap };
}
