/** Workspaces: named disks shared by browsercode runs that name them. */
import type { CamelKeys } from '../casing.js';
import { toSnake } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type { CreateWorkspaceRequest, PageQuery, UpdateWorkspaceRequest, Workspace, WorkspaceFileList, WorkspaceList } from '../models.js';
import { PageIterator } from '../pagination.js';
import type { FileInput } from '../uploads.js';
import { FileHandle, requestOptions, seg, uploadFiles, type UploadedFile } from './shared.js';

/** Paging of a list: `limit` is the page size, `cursor` starts later. */
export type PageOptions = CamelKeys<PageQuery> & RequestOptions;

/** The project's workspaces. */
export class Workspaces {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Creates a workspace. */
  create(options: CamelKeys<CreateWorkspaceRequest> & RequestOptions): Promise<Workspace> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<Workspace>('POST', '/agent-workspaces', { signal, timeoutMs, maxRetries, body: toSnake(request) as CreateWorkspaceRequest });
  }

  /** Every workspace, across pages. */
  list(options: PageOptions = {}): PageIterator<Workspace> {
    return new PageIterator<Workspace>(async (cursor) => {
      const page = await this.#core.request<WorkspaceList>('GET', '/agent-workspaces', { ...requestOptions(options), idempotent: true, query: { limit: options.limit, cursor } });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }

  /** One workspace. */
  get(workspaceId: string, options: RequestOptions = {}): Promise<Workspace> {
    return this.#core.request<Workspace>('GET', `/agent-workspaces/${seg(workspaceId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** Renames a workspace. */
  update(workspaceId: string, options: CamelKeys<UpdateWorkspaceRequest> & RequestOptions): Promise<Workspace> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<Workspace>('PATCH', `/agent-workspaces/${seg(workspaceId)}`, { signal, timeoutMs, maxRetries, body: toSnake(request) as UpdateWorkspaceRequest });
  }

  /** Deletes a workspace and its files. */
  async delete(workspaceId: string, options: RequestOptions = {}): Promise<void> {
    await this.#core.request<undefined>('DELETE', `/agent-workspaces/${seg(workspaceId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** Uploads one file into the workspace (a path in Node, a File, bytes or `{name, content}`). */
  async upload(workspaceId: string, file: FileInput, options: { name?: string } & RequestOptions = {}): Promise<UploadedFile> {
    const [uploaded] = await uploadFiles(this.#core, `/agent-workspaces/${seg(workspaceId)}/files`, [{ input: file, name: options.name }], options);
    return uploaded!;
  }

  /** The workspace's files across pages, each able to download itself. */
  files(workspaceId: string, options: PageOptions = {}): PageIterator<FileHandle> {
    return new PageIterator<FileHandle>(async (cursor) => {
      const page = await this.#core.request<WorkspaceFileList>('GET', `/agent-workspaces/${seg(workspaceId)}/files`, {
        ...requestOptions(options),
        idempotent: true,
        query: { limit: options.limit, cursor },
      });
      return { items: page.items.map((f) => new FileHandle(this.#core, f)), next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }
}
