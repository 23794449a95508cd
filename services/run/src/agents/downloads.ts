/**
 * Files the run's browser downloads are the agent's. The browser saves them where its owner says
 * (the browser-pool keeps and lists them); a watcher on every tab hears a download begin and end
 * (CDP `Page.downloadWillBegin` / `Page.downloadProgress`), so the loop waits for one an action
 * started, then asks the source what arrived. Each new file is copied onto the run's disk under
 * `downloads/` (so it becomes an output file of the run) and shown to the model with its name,
 * size and type; `read_download` renders one as text: CSV as a table, JSON indented, PDF as its
 * text. What a file says is page content, so it goes to the model fenced as data.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Browser, CDPSession, Page } from 'puppeteer-core';
import { safeTarget } from '../../../file-storage/src/client/disk-sync.js';
import { onNewTabs } from './dialogs.js';
import { ActionError } from './page-tools.js';

/** Where the run's browser keeps what it downloaded (the browser-pool's downloads list; a folder in tests). */
export interface DownloadSource {
  /** The finished downloads, oldest first. */
  list(): Promise<{ name: string; sizeBytes: number }[]>;
  /** A finished download's bytes; throws when it is larger than `maxBytes`. */
  read(name: string, maxBytes: number): Promise<Buffer>;
}

/** A file the browser downloaded, as the model and the steps show it. */
export interface DownloadedFile {
  name: string;
  sizeBytes: number;
  contentType: string;
  /** Where it is on the run's disk; undefined when it was not kept there (no disk, or too large). */
  diskPath?: string;
}

/** Largest download copied onto the run's disk (it then becomes an output file). */
export const MAX_KEPT_DOWNLOAD_BYTES = 50 * 1024 * 1024;
/** Largest download `read_download` renders (a PDF is parsed whole). */
export const MAX_READ_DOWNLOAD_BYTES = 10 * 1024 * 1024;
/** Longest wait after an action for the downloads it started to finish. */
export const DOWNLOAD_SETTLE_MS = 10_000;

const TYPES: Record<string, string> = {
  txt: 'text/plain', csv: 'text/csv', tsv: 'text/tab-separated-values', json: 'application/json', md: 'text/markdown', html: 'text/html', htm: 'text/html',
  xml: 'application/xml', pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg',
  gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml', xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
};

const extOf = (name: string) => (name.includes('.') ? name.slice(name.lastIndexOf('.') + 1).toLowerCase() : '');
export const downloadType = (name: string): string => TYPES[extOf(name)] ?? 'application/octet-stream';

/** `1,234 bytes`, `12.5 KB`, `3.1 MB`. */
export function byteSize(n: number): string {
  if (n < 10_000) return `${n.toLocaleString('en-US')} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** One download in a few words: `report.csv (36 bytes, text/csv)`. */
export const describeDownload = (d: DownloadedFile): string => `${d.name} (${byteSize(d.sizeBytes)}, ${d.contentType})`;

/**
 * Hears downloads begin and end in every tab of a browser for one run; `stop()` removes its
 * listeners and sessions (the browser may outlive the run).
 */
export class DownloadWatcher {
  readonly #unwatchTabs: () => void;
  readonly #sessions = new Map<Page, CDPSession>();
  readonly #inProgress = new Set<string>();
  #begun = 0;
  #finished = 0;
  #waiters: (() => void)[] = [];
  #beginWaiters: (() => void)[] = [];

  constructor(browser: Browser) {
    this.#unwatchTabs = onNewTabs(browser, (p) => this.watch(p));
  }

  watch(page: Page): void {
    if (this.#sessions.has(page) || page.isClosed()) return;
    void page
      .createCDPSession()
      .then(async (s) => {
        if (this.#sessions.has(page)) return void s.detach().catch(() => undefined);
        this.#sessions.set(page, s);
        s.on('Page.downloadWillBegin', (e: { guid: string }) => {
          this.#inProgress.add(e.guid);
          this.#begun++;
          for (const w of this.#beginWaiters.splice(0)) w();
        });
        s.on('Page.downloadProgress', (e: { guid: string; state: string }) => {
          if (e.state === 'inProgress') return;
          this.#inProgress.delete(e.guid);
          this.#finished++;
          if (!this.#inProgress.size) for (const w of this.#waiters.splice(0)) w();
        });
        await s.send('Page.enable');
      })
      .catch(() => undefined); // a tab that closed meanwhile
  }

  /** How many downloads began and ended so far (compare two marks to see what an action started). */
  mark(): { begun: number; finished: number } {
    return { begun: this.#begun, finished: this.#finished };
  }

  /** Whether a download began since `m`, waiting at most `ms` for one (a navigation that became a download fails before the download is announced). */
  async begunSince(m: { begun: number }, ms: number): Promise<boolean> {
    if (this.#begun === m.begun) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((r) => {
        this.#beginWaiters.push(r);
        timer = setTimeout(r, ms);
      });
      clearTimeout(timer);
    }
    return this.#begun !== m.begun;
  }

  /** Waits until no download is in progress, at most `ms`; false when one still is. */
  async settled(ms: number, signal: AbortSignal): Promise<boolean> {
    if (!this.#inProgress.size) return true;
    if (signal.aborted) return false;
    let timer: NodeJS.Timeout | undefined;
    let done!: () => void;
    const finished = new Promise<void>((r) => {
      done = r;
      this.#waiters.push(r);
      timer = setTimeout(r, ms);
      signal.addEventListener('abort', () => r(), { once: true });
    });
    await finished;
    clearTimeout(timer);
    this.#waiters = this.#waiters.filter((w) => w !== done);
    return !this.#inProgress.size;
  }

  stop(): void {
    this.#unwatchTabs();
    for (const s of this.#sessions.values()) void s.detach().catch(() => undefined);
    this.#sessions.clear();
    for (const w of [...this.#waiters.splice(0), ...this.#beginWaiters.splice(0)]) w();
  }
}

/**
 * The run's downloads: what the source had when the run began is known; each file that arrives
 * later is copied onto the run's disk (downloads/<name>) and reported once.
 */
export class RunDownloads {
  readonly #source: DownloadSource;
  readonly #diskDir: string | undefined;
  readonly #files = new Map<string, DownloadedFile>();
  #known = new Map<string, number>();

  constructor(source: DownloadSource, diskDir: string | undefined) {
    this.#source = source;
    this.#diskDir = diskDir;
  }

  /** Notes what the browser already holds (an earlier turn's downloads are on the session's disk already). */
  async start(): Promise<void> {
    for (const d of await this.#source.list()) {
      this.#known.set(d.name, d.sizeBytes);
      const diskPath = `downloads/${d.name}`;
      const onDisk = this.#diskDir ? await fs.stat(path.join(this.#diskDir, diskPath)).then((s) => s.isFile(), () => false) : false;
      this.#files.set(d.name, { name: d.name, sizeBytes: d.sizeBytes, contentType: downloadType(d.name), ...(onDisk ? { diskPath } : {}) });
    }
  }

  /** Every download of the browser, oldest first. */
  all(): DownloadedFile[] {
    return [...this.#files.values()];
  }

  /** The files that arrived since the last call, each copied onto the run's disk when it fits. */
  async arrived(): Promise<DownloadedFile[]> {
    const fresh: DownloadedFile[] = [];
    for (const d of await this.#source.list()) {
      if (this.#known.get(d.name) === d.sizeBytes) continue;
      this.#known.set(d.name, d.sizeBytes);
      const file: DownloadedFile = { name: d.name, sizeBytes: d.sizeBytes, contentType: downloadType(d.name) };
      if (this.#diskDir && d.sizeBytes <= MAX_KEPT_DOWNLOAD_BYTES && diskName(d.name)) {
        const diskPath = `downloads/${d.name}`;
        try {
          const bytes = await this.#source.read(d.name, MAX_KEPT_DOWNLOAD_BYTES);
          // A command of the run may have made downloads/ a link out of the disk: refused (safeTarget). A file or
          // link at the name itself is replaced, never written through.
          const target = await safeTarget(this.#diskDir, diskPath);
          await fs.rm(target, { force: true });
          await fs.writeFile(target, bytes, { flag: 'wx' });
          file.diskPath = diskPath;
        } catch {
          // Not kept on the disk (storage unreachable, a folder in the way): still listed, and read_download asks the source again.
        }
      }
      this.#files.set(d.name, file);
      fresh.push(file);
    }
    return fresh;
  }

  /** A download's contents as text the model can read (bounded by MAX_READ_DOWNLOAD_BYTES). */
  async read(name: string): Promise<{ text: string; kind: string }> {
    const file = this.#files.get(name) ?? [...this.#files.values()].find((f) => f.name.toLowerCase() === name.trim().toLowerCase());
    if (!file) {
      const names = this.all().map((f) => f.name);
      throw new ActionError(`No download is named ${JSON.stringify(name)}; ${names.length ? `the browser downloaded: ${names.join(', ')}` : 'the browser has downloaded nothing yet'}`);
    }
    if (file.sizeBytes > MAX_READ_DOWNLOAD_BYTES) throw new ActionError(`${file.name} is ${byteSize(file.sizeBytes)}, more than the ${byteSize(MAX_READ_DOWNLOAD_BYTES)} read_download reads`);
    return renderFile(file.name, await this.#source.read(file.name, MAX_READ_DOWNLOAD_BYTES));
  }
}

/** A name usable as a disk path segment (what Chromium suggests nearly always is). */
const diskName = (name: string) => Buffer.byteLength(name) <= 200 && name !== '.' && name !== '..' && !/[/\\\u0000]/.test(name);

/** Splits CSV text into rows (quoted fields may hold the separator, quotes and line breaks). */
export function parseCsv(text: string, sep = ','): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"' && cell === '') quoted = true;
    else if (c === sep) {
      row.push(cell);
      cell = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += c;
  }
  if (cell !== '' || row.length) {
    row.push(cell);
    rows.push(row);
  }
  return rows.filter((r) => r.some((v) => v.trim() !== ''));
}

/** CSV rows as a Markdown table (the first row the header). */
function csvTable(rows: string[][]): string {
  const width = Math.max(...rows.map((r) => r.length));
  const line = (r: string[]) => `| ${Array.from({ length: width }, (_, i) => (r[i] ?? '').replace(/\|/g, '\\|').replace(/\s+/g, ' ').trim()).join(' | ')} |`;
  return [line(rows[0]!), `|${' --- |'.repeat(width)}`, ...rows.slice(1).map(line)].join('\n');
}

/** Text that is not a binary file: valid UTF-8 without NUL bytes. */
function asText(bytes: Buffer): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

async function pdfText(bytes: Buffer): Promise<string> {
  // Loaded on first use: the PDF reader is large and most runs never read a PDF.
  const { extractText } = await import('unpdf');
  const { totalPages, text } = await extractText(new Uint8Array(bytes), { mergePages: false });
  return text.map((t, i) => (totalPages > 1 ? `--- page ${i + 1} of ${totalPages} ---\n` : '') + t.trim()).join('\n\n');
}

/** A downloaded file as text: CSV/TSV as a Markdown table, JSON indented, PDF as its text, other text as it is. */
export async function renderFile(name: string, bytes: Buffer): Promise<{ text: string; kind: string }> {
  const ext = extOf(name);
  if (ext === 'pdf' || bytes.subarray(0, 5).toString('latin1') === '%PDF-') {
    const text = await pdfText(bytes).catch((err: Error) => {
      throw new ActionError(`${name} could not be read as a PDF: ${err.message.split('\n')[0]}`);
    });
    return { text: text.trim() || `(${name} has no text layer: it holds only images)`, kind: 'pdf' };
  }
  const text = asText(bytes);
  if (text === undefined) throw new ActionError(`${name} is a binary file (${downloadType(name)}, ${byteSize(bytes.length)}); read_download reads text, CSV, JSON and PDF files`);
  const body = text.replace(/^\uFEFF/, '');
  if (ext === 'csv' || ext === 'tsv') {
    const rows = parseCsv(body, ext === 'tsv' ? '\t' : ',');
    if (rows.length) return { text: csvTable(rows), kind: 'markdown' };
  }
  if (ext === 'json' || /^\s*[[{]/.test(body)) {
    try {
      return { text: JSON.stringify(JSON.parse(body), null, 2), kind: 'json' };
    } catch {
      // not JSON after all: shown as text
    }
  }
  return { text: body, kind: 'text' };
}
