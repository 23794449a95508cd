/**
 * The file-storage domain: uploads through presigned links, disks and their entries, run input
 * and output files, workspaces and objects. Used by the gRPC handlers and the blob HTTP server.
 */
import type { Readable } from 'node:stream';
import type { AgentName } from '../../common/src/agent-name.js';
import { ConflictError, InvalidArgumentError, NotFoundError, ResourceExhaustedError } from '../../common/src/errors.js';
import { newId } from '../../common/src/ids.js';
import type { Logger } from '../../common/src/logger.js';
import type { Page } from '../../common/src/keyset.js';
import type { Signer, Verdict } from '../../common/src/signing.js';
import { TooLargeError, type BlobStore, type StoredBlob } from './blob-store.js';
import type { DiskRow, EntryRow, FileRepository, FileRow, RunFileRow, WorkspaceRow } from './file.repository.js';
import { checkDiskPath, checkFileName, contentTypeFor } from './names.js';

const LINK_USED = 'This upload link was already used; add the file again for a new link';

export interface FileStorageOptions {
  repo: FileRepository;
  store: BlobStore;
  signer: Signer;
  logger: Logger;
  /** Base URL of the blob HTTP endpoint as clients reach it. */
  publicUrl: string;
  maxFileBytes: number;
  uploadTtlSeconds: number;
  downloadTtlSeconds: number;
}

export interface Link {
  url: string;
  expiresAt: string;
}

/** A file as listed: the record plus a fresh download link. */
export interface ListedFile {
  id: string;
  name: string;
  kind: 'input' | 'output';
  sizeBytes: number;
  contentType: string;
  createdAt: string;
  downloadUrl: string;
  runId: string | null;
  workspaceId: string | null;
}

const OBJECT_KEY = /^(?!\/)(?!.*(?:^|\/)\.\.?(?:\/|$))[A-Za-z0-9._\-/]{1,512}$/;

export class FileStorage {
  readonly #o: FileStorageOptions;
  /** Blobs no row referred to at the last collection, and since when (ms). */
  readonly #unreferencedSince = new Map<string, number>();

  constructor(options: FileStorageOptions) {
    this.#o = options;
  }

  get maxFileBytes(): number {
    return this.#o.maxFileBytes;
  }

  // ---- links ----

  #link(path: string, parts: string[], ttlSeconds: number, query: Record<string, string> = {}): Link {
    const exp = this.#o.signer.expiry(ttlSeconds);
    const sig = this.#o.signer.sign(parts, exp);
    const qs = new URLSearchParams({ ...query, exp: String(exp), sig });
    return { url: `${this.#o.publicUrl}${path}?${qs}`, expiresAt: new Date(exp * 1000).toISOString() };
  }

  uploadLink(fileId: string): Link {
    return this.#link(`/u/${fileId}`, ['PUT', fileId], this.#o.uploadTtlSeconds);
  }

  /** A GET link for a blob, served with this name and type. */
  downloadLink(blobId: string, name: string, contentType: string, ttlSeconds = this.#o.downloadTtlSeconds): Link {
    return this.#link(`/d/${blobId}`, ['GET', blobId, name, contentType], ttlSeconds, { name, type: contentType });
  }

  verifyUpload(fileId: string, exp: number, sig: string): Verdict {
    return this.#o.signer.verify(['PUT', fileId], exp, sig);
  }

  verifyDownload(blobId: string, name: string, contentType: string, exp: number, sig: string): Verdict {
    return this.#o.signer.verify(['GET', blobId, name, contentType], exp, sig);
  }

  /**
   * What to do when a file's upload link expired: links are never renewed, so the file is added
   * again (a new id and link) on the route it was added on. Called only for a link whose signature
   * holds, so it names nothing its holder was not given.
   */
  async expiredUploadAdvice(fileId: string): Promise<string> {
    const f = await this.#o.repo.file(fileId);
    const route = f?.workspaceId ? `/api/v1/agent-workspaces/${f.workspaceId}/files` : `/api/v1/agents/${f?.agent ?? '{agent}'}/files`;
    return `Upload link expired; add ${f ? JSON.stringify(f.name) : 'the file'} again (POST ${route}) for a new id and upload link`;
  }

  // ---- uploads ----

  async createUploads(projectId: string, owner: { agent: AgentName } | { workspaceId: string }, names: string[]): Promise<{ id: string; name: string; uploadUrl: string }[]> {
    if (names.length < 1 || names.length > 20) throw new InvalidArgumentError('Between 1 and 20 files can be added at once');
    names.forEach(checkFileName);
    if ('workspaceId' in owner) await this.workspace(projectId, owner.workspaceId);
    const rows = names.map((name) => ({
      id: newId('file'),
      projectId,
      agent: 'agent' in owner ? owner.agent : null,
      workspaceId: 'workspaceId' in owner ? owner.workspaceId : null,
      name,
      contentType: contentTypeFor(name),
    }));
    await this.#o.repo.insertFiles(rows);
    return rows.map((r) => ({ id: r.id, name: r.name, uploadUrl: this.uploadLink(r.id).url }));
  }

  /**
   * Stores an upload's bytes. The blob is complete and renamed into place before the record
   * points at it, so a crash at any moment leaves the file either pending or uploaded, never
   * partial. A link is used once: a second upload is refused and leaves the stored file as it is.
   */
  async receiveUpload(fileId: string, body: Readable, contentType: string | undefined): Promise<FileRow> {
    const f = await this.#o.repo.file(fileId);
    if (!f) throw new NotFoundError('File not found');
    if (f.state === 'uploaded') throw new ConflictError(LINK_USED);
    const blob = await this.#o.store.put(body, this.#o.maxFileBytes);
    const type = contentType && contentType !== 'application/octet-stream' ? contentType : f.contentType;
    const done = await this.#o.repo.completeUpload(fileId, { blobId: blob.id, sizeBytes: blob.sizeBytes, sha256: blob.sha256, contentType: type });
    if (done === undefined || done === 'uploaded') {
      await this.#o.store.delete(blob.id); // the file was deleted meanwhile (its workspace was), or another upload won
      if (done === 'uploaded') throw new ConflictError(LINK_USED);
      throw new NotFoundError('File not found');
    }
    return done;
  }

  async getFile(projectId: string, fileId: string): Promise<FileRow> {
    const f = await this.#o.repo.file(fileId);
    if (!f || f.projectId !== projectId) throw new NotFoundError('File not found');
    return f;
  }

  fileDownloadUrl(f: { blobId: string | null; name: string; contentType: string }): string {
    return f.blobId ? this.downloadLink(f.blobId, f.name.slice(f.name.lastIndexOf('/') + 1), f.contentType).url : '';
  }

  // ---- disks ----

  async createDisk(projectId: string, agent: AgentName | null, owner: { sessionId: string } | { workspaceId: string }): Promise<DiskRow> {
    if ('workspaceId' in owner) {
      const ws = await this.workspace(projectId, owner.workspaceId);
      return (await this.#o.repo.disk(projectId, ws.diskId))!;
    }
    if (!owner.sessionId) throw new InvalidArgumentError('A disk needs a session or a workspace');
    return this.#o.repo.createDisk({ id: newId('dsk'), projectId, agent, sessionId: owner.sessionId, workspaceId: null });
  }

  async disk(projectId: string, diskId: string): Promise<DiskRow> {
    const d = await this.#o.repo.disk(projectId, diskId);
    if (!d) throw new NotFoundError('Disk not found');
    return d;
  }

  /**
   * Copies uploaded files onto a disk at their names and records them as the run's inputs.
   * Ids that are unknown, not uploaded, another project's or another agent's are returned missing.
   */
  async attachFiles(projectId: string, agent: AgentName, diskId: string, runId: string, fileIds: string[]): Promise<{ attached: string[]; missing: string[] }> {
    const d = await this.disk(projectId, diskId);
    if (d.agent && d.agent !== agent) throw new InvalidArgumentError('The disk belongs to the other agent');
    const found = new Map((await this.#o.repo.filesByIds(projectId, [...new Set(fileIds)])).map((f) => [f.id, f]));
    const attached: string[] = [];
    const missing: string[] = [];
    for (const id of fileIds) {
      const f = found.get(id);
      if (!f || f.state !== 'uploaded' || !f.blobId || f.agent !== agent || f.workspaceId) {
        if (!missing.includes(id)) missing.push(id);
        continue;
      }
      await this.#o.repo.putEntry(
        { diskId, path: f.name, fileId: f.id, blobId: f.blobId, sizeBytes: f.sizeBytes, sha256: f.sha256!, contentType: f.contentType, runId: runId || null },
        runId ? { kind: 'input', projectId, agent } : undefined,
      );
      attached.push(id);
    }
    return { attached, missing };
  }

  async entries(projectId: string, diskId: string): Promise<EntryRow[]> {
    await this.disk(projectId, diskId);
    return this.#o.repo.entries(diskId);
  }

  async readEntry(projectId: string, diskId: string, path: string): Promise<Readable> {
    await this.disk(projectId, diskId);
    const e = await this.#o.repo.entry(diskId, checkDiskPath(path));
    const stream = e && (await this.#o.store.read(e.blobId));
    if (!stream) throw new NotFoundError(`No file at ${path}`);
    return stream;
  }

  /** Writes one path on a disk; with a run it becomes (or replaces) that run's output file. */
  async writeEntry(projectId: string, diskId: string, path: string, runId: string, body: Readable, contentType?: string): Promise<EntryRow> {
    const d = await this.disk(projectId, diskId);
    checkDiskPath(path);
    const blob: StoredBlob = await this.#o.store.put(body, this.#o.maxFileBytes).catch((err: unknown) => {
      throw err instanceof TooLargeError ? new ResourceExhaustedError(`${path} is larger than the file size limit of ${this.#o.maxFileBytes} bytes`) : err;
    });
    const agent = (d.agent ?? 'browsercode') as AgentName;
    return this.#o.repo.putEntry(
      { diskId, path, fileId: newId('file'), blobId: blob.id, sizeBytes: blob.sizeBytes, sha256: blob.sha256, contentType: contentType || contentTypeFor(path), runId: runId || null },
      runId ? { kind: 'output', projectId, agent } : undefined,
    );
  }

  async deleteEntry(projectId: string, diskId: string, path: string): Promise<boolean> {
    await this.disk(projectId, diskId);
    return this.#o.repo.deleteEntry(diskId, checkDiskPath(path));
  }

  async runFiles(projectId: string, agent: AgentName | null, runId: string, kind: 'input' | 'output' | null, limit: number, cursor: string): Promise<Page<ListedFile>> {
    const page = await this.#o.repo.runFiles(projectId, agent, runId, kind, Math.min(Math.max(limit || 50, 1), 200), cursor || undefined);
    return { ...page, items: page.items.map((r: RunFileRow) => ({
      id: r.fileId,
      name: r.name,
      kind: r.kind,
      sizeBytes: r.sizeBytes,
      contentType: r.contentType,
      createdAt: r.createdAt,
      downloadUrl: this.fileDownloadUrl(r),
      runId: r.runId,
      workspaceId: null,
    })) };
  }

  // ---- workspaces ----

  async createWorkspace(projectId: string, name: string): Promise<WorkspaceRow> {
    return this.#o.repo.createWorkspace({ id: newId('wsp'), projectId, name, diskId: newId('dsk') });
  }

  async workspace(projectId: string, id: string): Promise<WorkspaceRow> {
    const w = await this.#o.repo.workspace(projectId, id);
    if (!w) throw new NotFoundError('Workspace not found');
    return w;
  }

  async workspaces(projectId: string, limit: number, cursor: string): Promise<{ items: WorkspaceRow[]; nextCursor: string; hasMore: boolean }> {
    return this.#o.repo.workspaces(projectId, limit || 50, cursor || undefined);
  }

  async renameWorkspace(projectId: string, id: string, name: string): Promise<WorkspaceRow> {
    const w = await this.#o.repo.renameWorkspace(projectId, id, name);
    if (!w) throw new NotFoundError('Workspace not found');
    return w;
  }

  async deleteWorkspace(projectId: string, id: string): Promise<boolean> {
    return this.#o.repo.deleteWorkspace(projectId, id);
  }

  /** A page of a workspace's files by name; `cursor` is the nextCursor of the previous page. */
  async workspaceFiles(projectId: string, id: string, limit: number, cursor: string): Promise<Page<ListedFile>> {
    const w = await this.workspace(projectId, id);
    const page = await this.#o.repo.entryPage(w.diskId, Math.min(Math.max(limit || 50, 1), 200), cursor || undefined);
    return {
      ...page,
      items: page.items.map((e) => ({
        id: e.fileId,
        name: e.path,
        kind: e.runId ? 'output' : 'input',
        sizeBytes: e.sizeBytes,
        contentType: e.contentType,
        createdAt: e.modifiedAt,
        downloadUrl: this.fileDownloadUrl({ ...e, name: e.path }),
        runId: e.runId,
        workspaceId: w.id,
      })),
    };
  }

  // ---- garbage ----

  /**
   * Deletes blobs no row has referred to for `graceMs` (an overwritten file's old bytes, a
   * replaced object, a deleted workspace's files). The grace outlives every link handed out for
   * them and an upload whose row is not yet committed. Returns what was deleted.
   */
  async collectGarbage(graceMs: number, now = Date.now()): Promise<{ deleted: number; candidates: number }> {
    const stored = await this.#o.store.list(); // before the references: a blob stored after is not considered
    const referenced = await this.#o.repo.referencedBlobIds();
    const seen = new Set<string>();
    let deleted = 0;
    for (const id of stored) {
      if (referenced.has(id)) continue;
      seen.add(id);
      const since = this.#unreferencedSince.get(id);
      if (since === undefined) this.#unreferencedSince.set(id, now);
      else if (now - since >= graceMs) {
        await this.#o.store.delete(id);
        this.#unreferencedSince.delete(id);
        seen.delete(id);
        deleted++;
      }
    }
    for (const id of this.#unreferencedSince.keys()) if (!seen.has(id)) this.#unreferencedSince.delete(id);
    return { deleted, candidates: this.#unreferencedSince.size };
  }

  // ---- objects ----

  checkObjectKey(key: string): string {
    if (!OBJECT_KEY.test(key)) throw new InvalidArgumentError(`Invalid object key: ${JSON.stringify(key.slice(0, 80))}`);
    return key;
  }

  async putObject(projectId: string, key: string, contentType: string, body: Readable): Promise<StoredBlob> {
    this.checkObjectKey(key);
    const blob = await this.#o.store.put(body, Number.MAX_SAFE_INTEGER);
    await this.#o.repo.putObject({ projectId, key, blobId: blob.id, sizeBytes: blob.sizeBytes, sha256: blob.sha256, contentType: contentType || contentTypeFor(key) });
    return blob;
  }

  async getObject(projectId: string, key: string): Promise<{ contentType: string; sizeBytes: number; stream: Readable }> {
    const o = await this.#o.repo.object(projectId, this.checkObjectKey(key));
    const stream = o && (await this.#o.store.read(o.blobId));
    if (!o || !stream) throw new NotFoundError('Object not found');
    return { contentType: o.contentType, sizeBytes: o.sizeBytes, stream };
  }

  /** Removes an object; its blob goes with the next garbage collection unless something else refers to it. */
  async deleteObject(projectId: string, key: string): Promise<boolean> {
    return this.#o.repo.deleteObject(projectId, this.checkObjectKey(key));
  }

  async objectLink(projectId: string, key: string, ttlSeconds: number, filename: string): Promise<Link> {
    const o = await this.#o.repo.object(projectId, this.checkObjectKey(key));
    if (!o) throw new NotFoundError('Object not found');
    const name = filename || key.slice(key.lastIndexOf('/') + 1);
    return this.downloadLink(o.blobId, name, o.contentType, ttlSeconds || this.#o.downloadTtlSeconds);
  }
}
