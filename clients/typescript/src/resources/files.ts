/** Files: upload them for runs (presigned PUT, no key) and download what runs produced. */
import type { Core, RequestOptions } from '../core.js';
import type { FileUpload, FileUploadList } from '../models.js';
import type { FileInput } from '../uploads.js';
import { agentPath, downloadBytes, downloadTo, requestOptions, uploadFiles, type AgentOption, type Downloadable, type DownloadOptions, type UploadedFile } from './shared.js';

/** `files.upload`: the name to give the file (required for bytes and Blobs without one). */
export interface UploadOptions extends AgentOption, RequestOptions {
  /** The file's name on the run's disk (default: the path's or the File's own name). */
  name?: string;
}

function linkOf(file: Downloadable): { link: string; name: string } {
  if (typeof file === 'string') return { link: file, name: new URL(file, 'http://x').searchParams.get('name') || 'download' };
  return { link: file.downloadUrl, name: file.name ?? 'download' };
}

/** An agent's uploaded files (`browser-agent` unless `agent` says otherwise). */
export class Files {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Adds files by name and returns their presigned upload links (PUT the bytes yourself; `upload` does both). */
  async create(names: string[], options: AgentOption & RequestOptions = {}): Promise<FileUpload[]> {
    const body = { files: names.map((name) => ({ name })) };
    return (await this.#core.request<FileUploadList>('POST', `${agentPath(options)}/files`, { ...requestOptions(options), body })).items;
  }

  /** Uploads one file (a path in Node, a File, bytes or `{name, content}`); attach its id to a run with `attachedFileIds`. */
  async upload(file: FileInput, options: UploadOptions = {}): Promise<UploadedFile> {
    const [uploaded] = await uploadFiles(this.#core, `${agentPath(options)}/files`, [{ input: file, name: options.name }], options);
    return uploaded!;
  }

  /** Downloads a file (from a file list, or its download link): to a path with `{to}` (Node), else its bytes. */
  download(file: Downloadable, options: DownloadOptions): Promise<string>;
  download(file: Downloadable, options?: RequestOptions): Promise<Uint8Array>;
  download(file: Downloadable, options: RequestOptions & { to?: string } = {}): Promise<string | Uint8Array> {
    const { link, name } = linkOf(file);
    const { to } = options;
    return to === undefined ? downloadBytes(this.#core, link, options) : downloadTo(this.#core, link, name, { ...options, to });
  }
}
