/**
 * The file-storage tables and the only code that knows them: uploaded files, disks (one per
 * session, one per workspace) and their entries, run input/output files, workspaces, objects.
 * Blobs are immutable; rows point at them, so overwriting a path never changes bytes another
 * row (an earlier run's output, an attached input) still refers to.
 */
import { outboxMigration } from '../../common/src/outbox.js';
import type { AgentName } from '../../common/src/agent-name.js';
import type { Knex, Migration } from '../../common/src/db.js';
import { keysetPage, newestFirst, type Page } from '../../common/src/keyset.js';

export const migrations: Migration[] = [
  {
    name: '20261122010000_files_disks_workspaces',
    async up(knex) {
      await knex.schema.createTable('files', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('agent');
        t.string('workspace_id');
        t.string('name', 1024).notNullable();
        t.string('state', 16).notNullable();
        t.string('blob_id');
        t.bigInteger('size_bytes').notNullable().defaultTo(0);
        t.string('sha256', 64);
        t.string('content_type').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('uploaded_at', { useTz: true });
        t.index(['project_id']);
      });
      await knex.schema.createTable('workspaces', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('name').notNullable();
        t.string('disk_id').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(['project_id', 'created_at']);
      });
      await knex.schema.createTable('disks', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('agent');
        t.string('session_id');
        t.string('workspace_id');
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.unique(['project_id', 'session_id']);
        t.unique(['workspace_id']);
      });
      await knex.schema.createTable('disk_entries', (t) => {
        t.string('disk_id').notNullable();
        t.string('path', 1024).notNullable();
        t.string('file_id').notNullable();
        t.string('blob_id').notNullable();
        t.bigInteger('size_bytes').notNullable();
        t.string('sha256', 64).notNullable();
        t.string('content_type').notNullable();
        t.string('run_id');
        t.timestamp('modified_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(['disk_id', 'path']);
      });
      await knex.schema.createTable('run_files', (t) => {
        t.string('run_id').notNullable();
        t.string('kind', 8).notNullable();
        t.string('name', 1024).notNullable();
        t.string('file_id').notNullable();
        t.string('project_id').notNullable();
        t.string('agent').notNullable();
        t.string('blob_id').notNullable();
        t.bigInteger('size_bytes').notNullable();
        t.string('sha256', 64).notNullable();
        t.string('content_type').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(['run_id', 'kind', 'name']);
      });
      await knex.schema.createTable('objects', (t) => {
        t.string('project_id').notNullable();
        t.string('key', 512).notNullable();
        t.string('blob_id').notNullable();
        t.bigInteger('size_bytes').notNullable();
        t.string('sha256', 64).notNullable();
        t.string('content_type').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(['project_id', 'key']);
      });
    },
  },
  // Webhook events (file.created), written in the transaction that records the output file.
  outboxMigration('20261202000000_webhook_outbox'),
];


export interface FileRow {
  id: string;
  projectId: string;
  agent: AgentName | null;
  workspaceId: string | null;
  name: string;
  state: 'pending' | 'uploaded';
  blobId: string | null;
  sizeBytes: number;
  sha256: string | null;
  contentType: string;
  createdAt: string;
}

export interface DiskRow {
  id: string;
  projectId: string;
  agent: AgentName | null;
  sessionId: string | null;
  workspaceId: string | null;
  createdAt: string;
}

export interface EntryRow {
  diskId: string;
  path: string;
  fileId: string;
  blobId: string;
  sizeBytes: number;
  sha256: string;
  contentType: string;
  runId: string | null;
  modifiedAt: string;
}

export interface RunFileRow {
  runId: string;
  kind: 'input' | 'output';
  name: string;
  fileId: string;
  projectId: string;
  agent: AgentName;
  blobId: string;
  sizeBytes: number;
  sha256: string;
  contentType: string;
  createdAt: string;
}

/**
 * Called inside the transaction that records a run's output file, with its row: the webhook
 * outbox records `file.created` there, so the file and its event commit together.
 */
export type OutputFileHook = (trx: Knex, f: RunFileRow) => Promise<void>;

export interface WorkspaceRow {
  id: string;
  projectId: string;
  name: string;
  diskId: string;
  createdAt: string;
  updatedAt: string;
}

export interface ObjectRow {
  projectId: string;
  key: string;
  blobId: string;
  sizeBytes: number;
  sha256: string;
  contentType: string;
}

const iso = (v: unknown): string => new Date(v as string).toISOString();

function file(r: any): FileRow {
  return { id: r.id, projectId: r.project_id, agent: r.agent, workspaceId: r.workspace_id, name: r.name, state: r.state, blobId: r.blob_id, sizeBytes: Number(r.size_bytes), sha256: r.sha256, contentType: r.content_type, createdAt: iso(r.created_at) };
}
function disk(r: any): DiskRow {
  return { id: r.id, projectId: r.project_id, agent: r.agent, sessionId: r.session_id, workspaceId: r.workspace_id, createdAt: iso(r.created_at) };
}
function entry(r: any): EntryRow {
  return { diskId: r.disk_id, path: r.path, fileId: r.file_id, blobId: r.blob_id, sizeBytes: Number(r.size_bytes), sha256: r.sha256, contentType: r.content_type, runId: r.run_id, modifiedAt: iso(r.modified_at) };
}
function runFile(r: any): RunFileRow {
  return { runId: r.run_id, kind: r.kind, name: r.name, fileId: r.file_id, projectId: r.project_id, agent: r.agent, blobId: r.blob_id, sizeBytes: Number(r.size_bytes), sha256: r.sha256, contentType: r.content_type, createdAt: iso(r.created_at) };
}
function workspace(r: any): WorkspaceRow {
  return { id: r.id, projectId: r.project_id, name: r.name, diskId: r.disk_id, createdAt: iso(r.created_at), updatedAt: iso(r.updated_at) };
}

export class FileRepository {
  readonly #knex: Knex;
  readonly #onOutputFile: OutputFileHook | undefined;
  constructor(knex: Knex, onOutputFile?: OutputFileHook) {
    this.#knex = knex;
    this.#onOutputFile = onOutputFile;
  }

  async insertFiles(rows: { id: string; projectId: string; agent: AgentName | null; workspaceId: string | null; name: string; contentType: string }[]): Promise<void> {
    await this.#knex('files').insert(rows.map((r) => ({ id: r.id, project_id: r.projectId, agent: r.agent, workspace_id: r.workspaceId, name: r.name, state: 'pending', content_type: r.contentType })));
  }

  async file(id: string): Promise<FileRow | undefined> {
    const r = await this.#knex('files').where({ id }).first();
    return r ? file(r) : undefined;
  }

  async filesByIds(projectId: string, ids: string[]): Promise<FileRow[]> {
    if (!ids.length) return [];
    return (await this.#knex('files').where({ project_id: projectId }).whereIn('id', ids)).map(file);
  }

  /**
   * Points a pending file at its newly stored blob; a workspace file lands on the workspace's disk
   * in the same transaction. An upload link is used once: a file already uploaded is left as it is
   * ('uploaded'), so of two uploads racing on one link exactly one wins. Undefined when the file is gone.
   */
  async completeUpload(id: string, blob: { blobId: string; sizeBytes: number; sha256: string; contentType: string }): Promise<FileRow | 'uploaded' | undefined> {
    return this.#knex.transaction(async (trx) => {
      const before = await trx('files').where({ id }).forUpdate().first();
      if (!before) return undefined;
      if (before.state === 'uploaded') return 'uploaded';
      await trx('files').where({ id }).update({ state: 'uploaded', blob_id: blob.blobId, size_bytes: blob.sizeBytes, sha256: blob.sha256, content_type: blob.contentType, uploaded_at: trx.fn.now() });
      const f = file({ ...before, state: 'uploaded', blob_id: blob.blobId, size_bytes: blob.sizeBytes, sha256: blob.sha256, content_type: blob.contentType });
      if (f.workspaceId) {
        const ws = await trx('workspaces').where({ id: f.workspaceId }).first();
        if (ws) await this.#upsertEntry(trx, { diskId: ws.disk_id, path: f.name, fileId: f.id, blobId: blob.blobId, sizeBytes: blob.sizeBytes, sha256: blob.sha256, contentType: blob.contentType, runId: null });
      }
      return f;
    });
  }

  async #upsertEntry(q: Knex | Knex.Transaction, e: Omit<EntryRow, 'modifiedAt'>): Promise<void> {
    const row = { disk_id: e.diskId, path: e.path, file_id: e.fileId, blob_id: e.blobId, size_bytes: e.sizeBytes, sha256: e.sha256, content_type: e.contentType, run_id: e.runId, modified_at: new Date().toISOString() };
    await q('disk_entries').insert(row).onConflict(['disk_id', 'path']).merge();
  }

  // ---- disks ----

  async findDisk(projectId: string, owner: { sessionId?: string; workspaceId?: string }): Promise<DiskRow | undefined> {
    const q = this.#knex('disks').where({ project_id: projectId });
    const r = owner.sessionId ? await q.where({ session_id: owner.sessionId }).first() : await q.where({ workspace_id: owner.workspaceId }).first();
    return r ? disk(r) : undefined;
  }

  /** Inserts a disk unless its owner already has one; returns the owner's disk either way. */
  async createDisk(d: Omit<DiskRow, 'createdAt'>): Promise<DiskRow> {
    await this.#knex('disks')
      .insert({ id: d.id, project_id: d.projectId, agent: d.agent, session_id: d.sessionId, workspace_id: d.workspaceId })
      .onConflict(d.sessionId ? ['project_id', 'session_id'] : ['workspace_id'])
      .ignore();
    return (await this.findDisk(d.projectId, d.sessionId ? { sessionId: d.sessionId } : { workspaceId: d.workspaceId! }))!;
  }

  async disk(projectId: string, id: string): Promise<DiskRow | undefined> {
    const r = await this.#knex('disks').where({ id, project_id: projectId }).first();
    return r ? disk(r) : undefined;
  }

  async entries(diskId: string): Promise<EntryRow[]> {
    return (await this.#knex('disk_entries').where({ disk_id: diskId }).orderBy('path')).map(entry);
  }

  /** A page of a disk's entries by path (keyset after `cursor`). */
  async entryPage(diskId: string, limit: number, cursor: string | undefined): Promise<Page<EntryRow>> {
    const q = this.#knex('disk_entries').select('disk_entries.*').where({ disk_id: diskId });
    return keysetPage(this.#knex, q, { key: [{ column: 'path' }], order: 'asc', limit, cursor, map: entry });
  }

  async entry(diskId: string, path: string): Promise<EntryRow | undefined> {
    const r = await this.#knex('disk_entries').where({ disk_id: diskId, path }).first();
    return r ? entry(r) : undefined;
  }

  /** Writes a path on a disk and, with a run, records it as that run's input or output file. */
  async putEntry(e: Omit<EntryRow, 'modifiedAt'>, run?: { kind: 'input' | 'output'; projectId: string; agent: AgentName }): Promise<EntryRow> {
    await this.#knex.transaction(async (trx) => {
      await this.#upsertEntry(trx, e);
      if (run && e.runId) {
        await trx('run_files')
          .insert({ run_id: e.runId, kind: run.kind, name: e.path, file_id: e.fileId, project_id: run.projectId, agent: run.agent, blob_id: e.blobId, size_bytes: e.sizeBytes, sha256: e.sha256, content_type: e.contentType })
          .onConflict(['run_id', 'kind', 'name'])
          .merge();
        if (run.kind === 'output' && this.#onOutputFile) {
          await this.#onOutputFile(trx, runFile(await trx('run_files').where({ run_id: e.runId, kind: 'output', name: e.path }).first()));
        }
      }
    });
    return (await this.entry(e.diskId, e.path))!;
  }

  async deleteEntry(diskId: string, path: string): Promise<boolean> {
    // Count returned rows: PGlite's delete does not report a row count.
    return (await this.#knex('disk_entries').where({ disk_id: diskId, path }).delete(['path'])).length > 0;
  }

  /** A page of a run's files, inputs first, then by name (keyset after `cursor`). */
  async runFiles(projectId: string, agent: AgentName | null, runId: string, kind: 'input' | 'output' | null, limit: number, cursor: string | undefined): Promise<Page<RunFileRow>> {
    const q = this.#knex('run_files').select('run_files.*').where({ project_id: projectId, run_id: runId });
    if (agent) q.where({ agent });
    if (kind) q.where({ kind });
    return keysetPage(this.#knex, q, { key: [{ column: 'kind' }, { column: 'name' }], order: 'asc', limit, cursor, map: runFile });
  }

  // ---- workspaces ----

  async createWorkspace(w: { id: string; projectId: string; name: string; diskId: string }): Promise<WorkspaceRow> {
    await this.#knex.transaction(async (trx) => {
      await trx('workspaces').insert({ id: w.id, project_id: w.projectId, name: w.name, disk_id: w.diskId });
      await trx('disks').insert({ id: w.diskId, project_id: w.projectId, agent: 'browsercode', workspace_id: w.id });
    });
    return (await this.workspace(w.projectId, w.id))!;
  }

  async workspace(projectId: string, id: string): Promise<WorkspaceRow | undefined> {
    const r = await this.#knex('workspaces').where({ id, project_id: projectId }).first();
    return r ? workspace(r) : undefined;
  }

  /** A page of workspaces, newest first (keyset after `cursor`). */
  async workspaces(projectId: string, limit: number, cursor: string | undefined): Promise<Page<WorkspaceRow>> {
    const q = this.#knex('workspaces').select('workspaces.*').where({ project_id: projectId });
    return keysetPage(this.#knex, q, { ...newestFirst(), limit, cursor, map: workspace });
  }

  async renameWorkspace(projectId: string, id: string, name: string): Promise<WorkspaceRow | undefined> {
    await this.#knex('workspaces').where({ id, project_id: projectId }).update({ name, updated_at: this.#knex.fn.now() });
    return this.workspace(projectId, id);
  }

  /** Deletes a workspace with its disk, entries and pending uploads; false when it does not exist. */
  async deleteWorkspace(projectId: string, id: string): Promise<boolean> {
    return this.#knex.transaction(async (trx) => {
      const ws = await trx('workspaces').where({ id, project_id: projectId }).first();
      if (!ws) return false;
      await trx('disk_entries').where({ disk_id: ws.disk_id }).delete();
      await trx('disks').where({ id: ws.disk_id }).delete();
      await trx('files').where({ workspace_id: id }).delete();
      await trx('workspaces').where({ id }).delete();
      return true;
    });
  }

  // ---- objects ----

  async putObject(o: ObjectRow): Promise<void> {
    await this.#knex('objects')
      .insert({ project_id: o.projectId, key: o.key, blob_id: o.blobId, size_bytes: o.sizeBytes, sha256: o.sha256, content_type: o.contentType })
      .onConflict(['project_id', 'key'])
      .merge();
  }

  async object(projectId: string, key: string): Promise<ObjectRow | undefined> {
    const r = await this.#knex('objects').where({ project_id: projectId, key }).first();
    return r ? { projectId: r.project_id, key: r.key, blobId: r.blob_id, sizeBytes: Number(r.size_bytes), sha256: r.sha256, contentType: r.content_type } : undefined;
  }

  /** True when the object existed. */
  async deleteObject(projectId: string, key: string): Promise<boolean> {
    return (await this.#knex('objects').where({ project_id: projectId, key }).delete(['key'])).length > 0;
  }

  /** Every blob id some row refers to (for checks and clean-up). */
  async referencedBlobIds(): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const table of ['files', 'disk_entries', 'run_files', 'objects']) {
      for (const r of await this.#knex(table).whereNotNull('blob_id').distinct('blob_id')) ids.add(r.blob_id);
    }
    return ids;
  }
}
