/** FileStorageService handlers: proto ↔ domain. */
import { Readable } from 'node:stream';
import type * as grpc from '@grpc/grpc-js';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { Agent, agentEnum, agentName, requireAgentName } from '../../common/src/agent-name.js';
import type { Handlers } from '../../common/src/grpc.js';
import {
  FileKind,
  type DiskEntry,
  type FileInfo,
  type FileStorageServiceService,
  type Disk,
  type Workspace,
} from '../../../gen/ats/filestorage/v1/file_storage.js';
import type { DiskRow, EntryRow, FileRow, WorkspaceRow } from './file.repository.js';
import type { FileStorage, ListedFile } from './file-storage.js';

function diskOut(d: DiskRow): Disk {
  return { id: d.id, projectId: d.projectId, agent: agentEnum(d.agent), sessionId: d.sessionId ?? undefined, workspaceId: d.workspaceId ?? undefined, createdAt: d.createdAt };
}
function entryOut(e: EntryRow): DiskEntry {
  return { path: e.path, sizeBytes: e.sizeBytes, sha256: e.sha256, modifiedAt: e.modifiedAt };
}
function workspaceOut(w: WorkspaceRow): Workspace {
  return { id: w.id, projectId: w.projectId, name: w.name, diskId: w.diskId, createdAt: w.createdAt, updatedAt: w.updatedAt };
}
function listedOut(projectId: string, agent: Agent, f: ListedFile): FileInfo {
  return {
    id: f.id,
    projectId,
    agent,
    name: f.name,
    kind: f.kind === 'output' ? FileKind.FILE_KIND_OUTPUT : FileKind.FILE_KIND_INPUT,
    sizeBytes: f.sizeBytes,
    contentType: f.contentType,
    createdAt: f.createdAt,
    downloadUrl: f.downloadUrl,
    uploaded: true,
    runId: f.runId ?? undefined,
    workspaceId: f.workspaceId ?? undefined,
  };
}

/** Splits a header-then-chunks client stream into its header and a byte stream of the rest. */
async function headerAndBody<H>(call: AsyncIterable<{ header?: H | undefined; chunk?: Buffer | undefined }>, what: string): Promise<{ header: H; body: Readable }> {
  const it = call[Symbol.asyncIterator]();
  const first = await it.next();
  const header = first.done ? undefined : (first.value.header as H | undefined);
  if (!header) throw new InvalidArgumentError(`${what}: the first message must be the header`);
  const body = Readable.from(
    (async function* () {
      for (;;) {
        const n = await it.next();
        if (n.done) return;
        if (n.value.chunk?.length) yield n.value.chunk;
      }
    })(),
  );
  return { header, body };
}

/** Writes a byte stream to a gRPC server stream, respecting backpressure. */
async function pump(from: Readable, call: grpc.ServerWritableStream<unknown, unknown>, wrap: (chunk: Buffer) => unknown): Promise<void> {
  for await (const chunk of from) {
    if (call.cancelled) {
      from.destroy();
      return;
    }
    if (!call.write(wrap(chunk as Buffer))) await new Promise((r) => call.once('drain', r));
  }
}

export function fileStorageHandlers(files: FileStorage): Handlers<typeof FileStorageServiceService> {
  const fileInfo = (f: FileRow): FileInfo => ({
    id: f.id,
    projectId: f.projectId,
    agent: agentEnum(f.agent),
    name: f.name,
    kind: FileKind.FILE_KIND_INPUT,
    sizeBytes: f.sizeBytes,
    contentType: f.contentType,
    createdAt: f.createdAt,
    downloadUrl: f.state === 'uploaded' ? files.fileDownloadUrl(f) : '',
    uploaded: f.state === 'uploaded',
    workspaceId: f.workspaceId ?? undefined,
  });
  return {
    async createUploads(req) {
      const items = await files.createUploads(req.projectId, { agent: requireAgentName(req.agent) }, req.files.map((f) => f.name));
      return { items };
    },
    async getFile(req) {
      return { file: fileInfo(await files.getFile(req.projectId, req.fileId)) };
    },
    async attachFiles(req) {
      const r = await files.attachFiles(req.projectId, requireAgentName(req.agent), req.diskId, req.runId, req.fileIds);
      return { attachedFileIds: r.attached, missingFileIds: r.missing };
    },
    async createDisk(req) {
      const owner = req.workspaceId ? { workspaceId: req.workspaceId } : req.sessionId ? { sessionId: req.sessionId } : undefined;
      if (!owner) throw new InvalidArgumentError('A disk needs a session or a workspace');
      return { disk: diskOut(await files.createDisk(req.projectId, 'sessionId' in owner ? requireAgentName(req.agent) : 'browsercode', owner)) };
    },
    async getDisk(req) {
      return { disk: diskOut(await files.disk(req.projectId, req.diskId)) };
    },
    async listRunFiles(req) {
      const kind = req.kind === FileKind.FILE_KIND_INPUT ? 'input' : req.kind === FileKind.FILE_KIND_OUTPUT ? 'output' : null;
      const page = await files.runFiles(req.projectId, agentName(req.agent), req.runId, kind, req.limit, req.cursor);
      return { items: page.items.map((f) => listedOut(req.projectId, req.agent, f)), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async listDiskEntries(req) {
      return { entries: (await files.entries(req.projectId, req.diskId)).map(entryOut) };
    },
    async readDiskFile(req, call) {
      const stream = await files.readEntry(req.projectId, req.diskId, req.path);
      await pump(stream, call as grpc.ServerWritableStream<unknown, unknown>, (chunk) => ({ chunk }));
    },
    async writeDiskFile(call) {
      const { header, body } = await headerAndBody<{ projectId: string; diskId: string; path: string; runId: string; contentType: string }>(call, 'WriteDiskFile');
      return { entry: entryOut(await files.writeEntry(header.projectId, header.diskId, header.path, header.runId, body, header.contentType)) };
    },
    async deleteDiskFile(req) {
      return { deleted: await files.deleteEntry(req.projectId, req.diskId, req.path) };
    },
    async putObject(call) {
      const { header, body } = await headerAndBody<{ projectId: string; key: string; contentType: string }>(call, 'PutObject');
      const blob = await files.putObject(header.projectId, header.key, header.contentType, body);
      return { key: header.key, sizeBytes: blob.sizeBytes, sha256: blob.sha256 };
    },
    async getObject(req, call) {
      const o = await files.getObject(req.projectId, req.key);
      call.write({ contentType: o.contentType, sizeBytes: o.sizeBytes, chunk: Buffer.alloc(0) });
      await pump(o.stream, call as grpc.ServerWritableStream<unknown, unknown>, (chunk) => ({ contentType: '', sizeBytes: 0, chunk }));
    },
    async deleteObject(req) {
      return { deleted: await files.deleteObject(req.projectId, req.key) };
    },
    async signObjectUrl(req) {
      return files.objectLink(req.projectId, req.key, req.ttlSeconds, req.downloadFilename);
    },
    async createWorkspace(req) {
      return { workspace: workspaceOut(await files.createWorkspace(req.projectId, req.name)) };
    },
    async getWorkspace(req) {
      return { workspace: workspaceOut(await files.workspace(req.projectId, req.workspaceId)) };
    },
    async listWorkspaces(req) {
      const page = await files.workspaces(req.projectId, req.limit, req.cursor);
      return { items: page.items.map(workspaceOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async updateWorkspace(req) {
      return { workspace: workspaceOut(await files.renameWorkspace(req.projectId, req.workspaceId, req.name)) };
    },
    async deleteWorkspace(req) {
      return { deleted: await files.deleteWorkspace(req.projectId, req.workspaceId) };
    },
    async createWorkspaceUploads(req) {
      return { items: await files.createUploads(req.projectId, { workspaceId: req.workspaceId }, req.files.map((f) => f.name)) };
    },
    async listWorkspaceFiles(req) {
      const page = await files.workspaceFiles(req.projectId, req.workspaceId, req.limit, req.cursor);
      return { items: page.items.map((f) => listedOut(req.projectId, Agent.AGENT_UNSPECIFIED, f)), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
  };
}
