/**
 * What can be uploaded (a path in Node; bytes, a Blob or text with a name anywhere) and the
 * Node-only file system work behind paths. node:fs is imported only when a path is given, and
 * through a specifier bundlers leave alone, so the browser build never contains or loads it.
 */

/** Content given in memory: text, bytes or a Blob. */
export type FileContent = string | Uint8Array | ArrayBuffer | Blob;

/**
 * A file to upload: a path (Node only), a `File` (its own name), or content with a `name`
 * (`{ name: 'notes.txt', content: 'hello' }`, or bytes/Blob with the `name` option).
 */
export type FileInput = string | URL | Blob | Uint8Array | ArrayBuffer | { name: string; content: FileContent };

/** A file ready to send: its name and its bytes. */
export interface ResolvedFile {
  name: string;
  blob: Blob;
}

type NodeFs = typeof import('node:fs');
type NodeFsPromises = typeof import('node:fs/promises');

// Built at run time so that a bundler for the browser does not try to resolve a Node built-in
// that the browser path never reaches.
const NODE = 'node';
/** node:fs, loaded on first use (Node only). */
export function nodeFs(): Promise<NodeFs> {
  return import(/* @vite-ignore */ `${NODE}:fs`) as Promise<NodeFs>;
}
/** node:fs/promises, loaded on first use (Node only). */
export function nodeFsPromises(): Promise<NodeFsPromises> {
  return import(/* @vite-ignore */ `${NODE}:fs/promises`) as Promise<NodeFsPromises>;
}

/** The last segment of a path (either separator). */
export function baseName(path: string): string {
  return path.split(/[\\/]/).filter(Boolean).pop() ?? path;
}

const CONTENT_TYPES: Record<string, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  json: 'application/json',
  html: 'text/html',
  xml: 'application/xml',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  zip: 'application/zip',
};

/** A content type guessed from a file name's extension (octet-stream when unknown). */
export function contentTypeOf(name: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  return (ext && CONTENT_TYPES[ext]) || 'application/octet-stream';
}

function isBlob(value: unknown): value is Blob {
  return typeof Blob !== 'undefined' && value instanceof Blob;
}

function toBlob(content: FileContent, type: string): Blob {
  if (isBlob(content)) return content.type ? content : new Blob([content], { type });
  // A copy into a plain ArrayBuffer: a Uint8Array over a SharedArrayBuffer is no BlobPart.
  const part = typeof content === 'string' ? content : content instanceof ArrayBuffer ? content : new Uint8Array(content);
  return new Blob([part], { type });
}

/** Reads what `input` names into a name and a Blob; `name` overrides the file's own name. */
export async function resolveFile(input: FileInput, name?: string): Promise<ResolvedFile> {
  if (typeof input === 'string' || input instanceof URL) {
    const fs = await nodeFs().catch(() => {
      throw new TypeError('A path can be uploaded in Node only; in a browser pass a File, a Blob or bytes with a name');
    });
    const path = input instanceof URL ? decodeURIComponent(input.pathname) : input;
    const fileName = name ?? baseName(path);
    const blob = await fs.openAsBlob(input, { type: contentTypeOf(fileName) });
    return { name: fileName, blob };
  }
  if (isBlob(input)) {
    const fileName = name ?? (input as Blob & { name?: unknown }).name;
    if (typeof fileName !== 'string' || !fileName) throw new TypeError('A Blob needs a name: pass { name } or a File');
    return { name: fileName, blob: toBlob(input, contentTypeOf(fileName)) };
  }
  if (input instanceof Uint8Array || input instanceof ArrayBuffer) {
    if (!name) throw new TypeError('Bytes need a name: pass { name }');
    return { name, blob: toBlob(input, contentTypeOf(name)) };
  }
  const fileName = name ?? input.name;
  return { name: fileName, blob: toBlob(input.content, contentTypeOf(fileName)) };
}

/** Where a download named `name` goes: `to` itself, or `to/<name>` when `to` is a folder (or ends with a separator); its folder is created. */
export async function downloadTarget(to: string, name: string): Promise<string> {
  const fsp = await nodeFsPromises().catch(() => {
    throw new TypeError('download({ to }) writes to disk in Node only; in a browser use bytes()');
  });
  let target = to;
  const stat = await fsp.stat(to).catch(() => undefined);
  if (stat?.isDirectory() || /[\\/]$/.test(to)) target = `${to.replace(/[\\/]+$/, '')}/${baseName(name)}`;
  const parent = target.slice(0, Math.max(target.lastIndexOf('/'), target.lastIndexOf('\\')));
  if (parent) await fsp.mkdir(parent, { recursive: true });
  return target;
}

/** Writes a reply's body to the file `target`. */
export async function writeBody(res: Response, target: string): Promise<void> {
  const fsp = await nodeFsPromises();
  await fsp.writeFile(target, res.body ? (res.body as unknown as AsyncIterable<Uint8Array>) : new Uint8Array());
}
