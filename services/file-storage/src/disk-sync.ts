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
import { fromServiceError, RemoteError, Status } from '../../common/src/errors.js';
import type { ServiceClient } from '../../common/src/grpc.js';
import type { DiskEntry, FileStorageServiceService } from '../../../gen/ats/filestorage/v1/file_storage.js';
import { checkDiskPath, safeTarget } from './names.js';

export type FileStorageClient = ServiceClient<typeof FileStorageServiceService>;

/** What the disk held when it was materialised: path → sha256. */
export type DiskManifest = Map<string, string>;

const STREAM_DEADLINE_MS = 10 * 60 * 1000;
const CHUNK = 256 * 1024;
const NOFOLLOW_WRITE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW;

/** Writes every file of the disk into `dir` (created when missing); returns the manifest. */
export async function materializeDisk(client: FileStorageClient, projectId: string, diskId: string, dir: string): Promise<DiskManifest> {
  await fsp.mkdir(dir, { recursive: true });
  const { entries } = await client.api.listDiskEntries({ projectId, diskId });
  const manifest: DiskManifest = new Map();
  for (const e of entries) {
    const target = await safeTarget(dir, e.path);
    const call = client.api.readDiskFile({ projectId, diskId, path: e.path }, { deadlineMs: STREAM_DEADLINE_MS });
    const bytes = Readable.from(
      (async function* () {
        try {
          for await (const m of call) yield (m as { chunk: Buffer }).chunk;
        } catch (err) {
          throw fromServiceError(err);
        }
      })(),
    );
    // O_NOFOLLOW: a symlink planted at the target is refused, never written through.
    const handle = await fsp.open(target, NOFOLLOW_WRITE, 0o644);
    await pipeline(bytes, handle.createWriteStream({ highWaterMark: 1 << 20 }));
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

async function upload(client: FileStorageClient, header: { projectId: string; diskId: string; path: string; runId: string }, abs: string): Promise<DiskEntry> {
  const { stream, response } = client.api.writeDiskFile({ deadlineMs: STREAM_DEADLINE_MS });
  response.catch(() => {}); // awaited below; avoids an unhandled rejection while still writing
  // When the service ends the call early (a file over the limit), no 'drain' ever comes: stop waiting then.
  const ended = response.then(
    () => Promise.reject(new Error('the storage service ended the upload early')),
    (err: unknown) => Promise.reject(err),
  );
  ended.catch(() => {});
  const write = async (msg: object) => {
    if (!stream.write(msg)) await Promise.race([once(stream, 'drain'), ended]);
  };
  const handle = await fsp.open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    await write({ header: { ...header, contentType: '' } });
    for await (const chunk of handle.createReadStream({ highWaterMark: CHUNK, autoClose: false })) await write({ chunk });
    stream.end();
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
  const res = await response;
  return res.entry!;
}

/** A changed file that could not be stored (over the size limit), and why. */
export interface SkippedFile {
  path: string;
  sha256: string;
  reason: string;
}

/**
 * Stores what changed in `dir` since `manifest` back onto the disk: new and modified files are
 * written as the run's output files; files gone from `dir` are deleted from the disk. A file
 * over the size limit is skipped (and reported), the others are still stored.
 */
export async function syncDisk(
  client: FileStorageClient,
  projectId: string,
  diskId: string,
  runId: string,
  dir: string,
  manifest: DiskManifest,
): Promise<{ written: DiskEntry[]; deleted: string[]; skipped: SkippedFile[] }> {
  const present = await walk(dir);
  const written: DiskEntry[] = [];
  const skipped: SkippedFile[] = [];
  for (const f of present) {
    const sha = await sha256Of(f.abs);
    if (sha === undefined || manifest.get(f.diskPath) === sha) continue;
    try {
      written.push(await upload(client, { projectId, diskId, path: f.diskPath, runId }, f.abs));
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
  return { written: written.sort((a, b) => a.path.localeCompare(b.path)), deleted: deleted.sort(), skipped };
}
