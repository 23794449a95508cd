/**
 * Files a browser downloaded from the web. Chromium saves them into the browser's own folder
 * (in-progress ones end in `.crdownload` and are skipped); `sync` uploads new or changed files
 * to object storage and records them, so they outlive the browser and its folder. Listing signs
 * a fresh, expiring link per file.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from '../../common/src/logger.js';
import type { BrowserRepository, DownloadRow } from './browser.repository.js';

/** Where downloads are kept: file-storage objects in production, anything in tests. */
export interface DownloadStore {
  put(projectId: string, key: string, contentType: string, body: Readable): Promise<void>;
  /** A presigned GET link served under `filename`. */
  sign(projectId: string, key: string, filename: string, ttlSeconds: number): Promise<string>;
}

/** A download as listed, with a fresh link. */
export interface ListedDownload {
  name: string;
  sizeBytes: number;
  lastModified: string;
  downloadUrl: string;
}

const TYPES: Record<string, string> = {
  txt: 'text/plain', csv: 'text/csv', json: 'application/json', html: 'text/html', xml: 'application/xml', pdf: 'application/pdf',
  zip: 'application/zip', gz: 'application/gzip', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
  webp: 'image/webp', svg: 'image/svg+xml', mp4: 'video/mp4', mp3: 'audio/mpeg',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};

function contentType(name: string): string {
  const ext = name.includes('.') ? name.slice(name.lastIndexOf('.') + 1).toLowerCase() : '';
  return TYPES[ext] ?? 'application/octet-stream';
}

/** Object keys allow a narrow alphabet; a download's name can be anything, so it is hashed. */
export function downloadKey(browserId: string, name: string): string {
  return `browser-downloads/${browserId}/${createHash('sha256').update(name).digest('hex').slice(0, 32)}`;
}

/** `name`, or `name (1).ext`, `name (2).ext`… when an earlier file took it. */
function uniqueName(name: string, taken: Set<string>): string {
  const dot = name.lastIndexOf('.');
  const [base, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  let candidate = name;
  for (let i = 1; taken.has(candidate); i++) candidate = `${base} (${i})${ext}`;
  taken.add(candidate);
  return candidate;
}

/** Stores and lists what browsers downloaded. */
export class Downloads {
  readonly #repo: BrowserRepository;
  readonly #store: DownloadStore;
  readonly #logger: Logger;
  readonly #ttlSeconds: number;
  readonly #syncing = new Map<string, Promise<void>>();

  constructor(o: { repo: BrowserRepository; store: DownloadStore; logger: Logger; ttlSeconds: number }) {
    this.#repo = o.repo;
    this.#store = o.store;
    this.#logger = o.logger;
    this.#ttlSeconds = o.ttlSeconds;
  }

  /**
   * Uploads the folder's complete files that are new or changed since the last sync, listed under
   * `nameOf(file)` (a file saved under a GUID gets the name the site suggested). One sync per browser at a time.
   */
  sync(projectId: string, browserId: string, dir: string, nameOf: (file: string) => string = (f) => f): Promise<void> {
    const prev = this.#syncing.get(browserId) ?? Promise.resolve();
    const next = prev.then(() => this.#sync(projectId, browserId, dir, nameOf));
    const tracked = next.finally(() => {
      if (this.#syncing.get(browserId) === tracked) this.#syncing.delete(browserId);
    });
    this.#syncing.set(browserId, tracked.catch(() => {}));
    return next;
  }

  async #sync(projectId: string, browserId: string, dir: string, nameOf: (file: string) => string): Promise<void> {
    let names: string[];
    try {
      names = (await fs.promises.readdir(dir)).filter((n) => !n.endsWith('.crdownload') && !n.startsWith('.'));
    } catch {
      return; // no folder: nothing was downloaded (or it is already gone)
    }
    if (!names.length) return;
    const files: { path: string; name: string; size: number; mtimeMs: number }[] = [];
    for (const n of names) {
      // lstat: the folder is the browser's; a symlink it planted must not make us read a host file.
      const st = await fs.promises.lstat(path.join(dir, n)).catch(() => undefined);
      if (st?.isFile()) files.push({ path: path.join(dir, n), name: nameOf(n), size: st.size, mtimeMs: Math.floor(st.mtimeMs) });
    }
    // Oldest first, so an earlier download keeps its name when a later one suggests the same.
    files.sort((a, b) => a.mtimeMs - b.mtimeMs || a.path.localeCompare(b.path));
    const known = new Map((await this.#repo.downloads(browserId)).map((d) => [d.name, d]));
    const taken = new Set<string>();
    for (const f of files) {
      const name = uniqueName(f.name, taken);
      const lastModified = new Date(f.mtimeMs).toISOString();
      const k = known.get(name);
      if (k && k.sizeBytes === f.size && k.lastModified === lastModified) continue;
      const row: DownloadRow = { browserId, name, sizeBytes: f.size, lastModified, objectKey: downloadKey(browserId, name) };
      let handle: fs.promises.FileHandle;
      try {
        handle = await fs.promises.open(f.path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      } catch {
        continue; // replaced by a link (or gone) since it was listed
      }
      await this.#store.put(projectId, row.objectKey, contentType(name), handle.createReadStream());
      await this.#repo.putDownload(row);
      this.#logger.debug({ browserId, sizeBytes: f.size }, 'download stored');
    }
  }

  /** The recorded downloads, oldest first, each with a fresh link. */
  async list(projectId: string, browserId: string): Promise<ListedDownload[]> {
    const rows = await this.#repo.downloads(browserId);
    return Promise.all(
      rows.map(async (d) => ({
        name: d.name,
        sizeBytes: d.sizeBytes,
        lastModified: d.lastModified,
        downloadUrl: await this.#store.sign(projectId, d.objectKey, d.name, this.#ttlSeconds),
      })),
    );
  }
}
