/** What the resources share: the agent option, path building and the file handles. */
import type { Core, RequestOptions } from '../core.js';
import type { AgentName, File as FileModel, FileUploadList } from '../models.js';
import { downloadTarget, resolveFile, writeBody, type FileInput } from '../uploads.js';

/** The agent a call is about; `browser-agent` when not given. */
export interface AgentOption {
  /** `browser-agent` (the default) or `browsercode`. */
  agent?: AgentName;
}

export const DEFAULT_AGENT: AgentName = 'browser-agent';

/** `/agents/<agent>` for the option's agent. */
export function agentPath(options: AgentOption = {}): string {
  return `/agents/${encodeURIComponent(options.agent ?? DEFAULT_AGENT)}`;
}

/** An id made safe as one path segment. */
export const seg = encodeURIComponent;

/** The request options out of a call's options (the rest is the call's own). */
export function requestOptions(options: RequestOptions = {}): RequestOptions {
  const { signal, timeoutMs, maxRetries } = options;
  return { signal, timeoutMs, maxRetries };
}

/** Options of a download: where to write it. */
export interface DownloadOptions extends RequestOptions {
  /** A file path, or an existing folder to write the file into under its name (Node only). */
  to: string;
}

/** Something with a download link: a file from a list, or the link itself. */
export type Downloadable = { downloadUrl: string; name?: string } | string;

/** Fetches a presigned download link's bytes. */
export function downloadBytes(core: Core, link: string, options: RequestOptions = {}): Promise<Uint8Array> {
  return core.presigned('GET', link, {}, options, async (res) => new Uint8Array(await res.arrayBuffer()));
}

/** Writes a presigned download link's bytes to `to`; returns the path written. */
export async function downloadTo(core: Core, link: string, name: string, options: DownloadOptions): Promise<string> {
  const target = await downloadTarget(options.to, name);
  await core.presigned('GET', link, {}, options, (res) => writeBody(res, target));
  return target;
}

export interface FileHandle extends FileModel {}
/** A file of a run or a workspace (the API's `File`) that can fetch its own bytes. */
export class FileHandle {
  readonly #core: Core;

  constructor(core: Core, data: FileModel) {
    Object.assign(this, data);
    this.#core = core;
  }

  /** Writes the file to `to` (a path, or a folder to hold it under its name); returns the path written. Node only. */
  download(options: DownloadOptions): Promise<string> {
    return downloadTo(this.#core, this.downloadUrl, this.name, options);
  }

  /** The file's bytes. */
  bytes(options?: RequestOptions): Promise<Uint8Array> {
    return downloadBytes(this.#core, this.downloadUrl, options);
  }

  /** The file's content as UTF-8 text. */
  async text(options?: RequestOptions): Promise<string> {
    return new TextDecoder().decode(await this.bytes(options));
  }

}

/** An uploaded file: the id to attach (`attachedFileIds`) and its name. */
export interface UploadedFile {
  id: string;
  name: string;
}

/** The API takes at most this many names per add call. */
const ADD_BATCH = 20;

/** Adds files at `addPath` (an agent's or a workspace's `/files`) and PUTs each one's bytes to its presigned link. */
export async function uploadFiles(core: Core, addPath: string, inputs: { input: FileInput; name?: string }[], options: RequestOptions = {}): Promise<UploadedFile[]> {
  const files = await Promise.all(inputs.map((f) => resolveFile(f.input, f.name)));
  const out: UploadedFile[] = [];
  for (let i = 0; i < files.length; i += ADD_BATCH) {
    const batch = files.slice(i, i + ADD_BATCH);
    const added = await core.request<FileUploadList>('POST', addPath, { ...requestOptions(options), body: { files: batch.map((f) => ({ name: f.name })) } });
    await Promise.all(
      added.items.map((item, k) =>
        core.presigned('PUT', item.upload_url, { body: batch[k]!.blob, headers: { 'Content-Type': batch[k]!.blob.type || 'application/octet-stream' } }, options, async (res) => {
          await res.body?.cancel();
        }),
      ),
    );
    out.push(...added.items.map((item) => ({ id: item.id, name: item.name })));
  }
  return out;
}
