/** File names and disk paths: what is allowed, and mapping a disk path into a directory safely. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError } from '../../common/src/errors.js';

/** Throws unless `name` is one path segment: no `/`, `\`, NUL, `.` or `..`, 1..255 bytes of UTF-8. */
export function checkFileName(name: string): string {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes === 0 || bytes > 255) throw new InvalidArgumentError(`File name must be 1 to 255 bytes of UTF-8: ${JSON.stringify(name.slice(0, 40))}`);
  if (name === '.' || name === '..' || /[/\\\u0000]/.test(name)) {
    throw new InvalidArgumentError(`File name must be a single path segment without /, \\, NUL, . or ..: ${JSON.stringify(name)}`);
  }
  return name;
}

/** Throws unless `p` is a relative "/"-separated path of valid segments (at most 1024 bytes). */
export function checkDiskPath(p: string): string {
  if (Buffer.byteLength(p, 'utf8') > 1024 || p.startsWith('/') || p === '') throw new InvalidArgumentError(`Invalid disk path: ${JSON.stringify(p.slice(0, 80))}`);
  for (const seg of p.split('/')) checkFileName(seg);
  return p;
}

/**
 * The absolute path of disk path `p` inside `root`, with its parent directories created. Refuses
 * any path whose directories are symlinks (an agent may plant one to escape the disk).
 */
export async function safeTarget(root: string, p: string): Promise<string> {
  checkDiskPath(p);
  const realRoot = await fs.realpath(root);
  const target = path.resolve(realRoot, ...p.split('/'));
  if (!target.startsWith(realRoot + path.sep)) throw new InvalidArgumentError(`Path escapes the disk: ${p}`);
  let dir = realRoot;
  for (const seg of p.split('/').slice(0, -1)) {
    dir = path.join(dir, seg);
    const st = await fs.lstat(dir).catch(() => undefined);
    if (!st) await fs.mkdir(dir);
    else if (!st.isDirectory()) throw new InvalidArgumentError(`Path escapes the disk or crosses a non-directory: ${p}`);
  }
  return target;
}

const TYPES: Record<string, string> = {
  txt: 'text/plain; charset=utf-8', md: 'text/markdown; charset=utf-8', csv: 'text/csv; charset=utf-8', tsv: 'text/tab-separated-values; charset=utf-8',
  json: 'application/json', html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml',
  js: 'text/javascript; charset=utf-8', ts: 'text/plain; charset=utf-8', py: 'text/x-python; charset=utf-8', css: 'text/css; charset=utf-8',
  pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip', tar: 'application/x-tar',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml',
  mp4: 'video/mp4', webm: 'video/webm', mp3: 'audio/mpeg', wav: 'audio/wav',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};

/** A MIME type from the file name's extension. */
export function contentTypeFor(name: string): string {
  const ext = name.includes('.') ? name.slice(name.lastIndexOf('.') + 1).toLowerCase() : '';
  return TYPES[ext] ?? 'application/octet-stream';
}
