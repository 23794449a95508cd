/**
 * Ad and tracker blocking (issue 24, `block_ads`): EasyList and EasyPrivacy (or the files
 * ADBLOCK_LISTS names) parsed by @ghostery/adblocker, used two ways.
 *
 * - Network, in each browser's egress proxy (egress-proxy.ts): every request of the browser
 *   already passes through it, so deciding there costs one lookup in memory and no CDP round
 *   trip. A blocked ad host is never resolved or dialled. The alternative, CDP `Fetch`, would
 *   pause every request of every page on a message to the pool and back. What the proxy sees is
 *   the host of an https request (the CONNECT) and the whole URL of an http one, so https is
 *   blocked by the lists' host rules (`||ads.example^`, most of both lists' network rules) and
 *   http by all rules.
 * - Cosmetic, per frame over the pool's own CDP session (live-browser.ts): the lists' hiding
 *   rules for the frame's host, their generic ones, and those that match the classes and ids the
 *   document has once loaded, as a stylesheet, so hidden ad slots are `display: none` and the
 *   agent's observation (which skips such elements) leaves them out.
 *
 * Parsing both lists takes seconds of CPU, so it runs once per process on a worker thread; the
 * engine comes back serialized and is rebuilt here in milliseconds. The serialized engine is also
 * kept in the user's cache folder under a hash of the lists' bytes and the engine's version, so
 * the next process (a restart, a test stack) rebuilds it from there without parsing.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { FiltersEngine, Request, type RequestType } from '@ghostery/adblocker';

export type { RequestType };

/** The lists Debian's webext-ublock-origin-chromium ships (scripts/install.sh installs it). */
export const DEFAULT_ADBLOCK_LISTS = [
  '/usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist/easylist.txt',
  '/usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist/easyprivacy.txt',
];

const ENGINE_VERSION = (createRequire(import.meta.url)('@ghostery/adblocker/package.json') as { version: string }).version;

function defaultCacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'agent-task-service-adblock');
}

async function writeAtomically(file: string, bytes: Uint8Array): Promise<void> {
  await fs.promises.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.promises.writeFile(tmp, bytes, { mode: 0o600 });
  await fs.promises.rename(tmp, file);
}

/** Most classes, ids and links of one document asked about for generic hiding rules. */
const MAX_DOM_TOKENS = 2000;

/** Runs in the worker: parses the lists and posts the serialized engine. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { FiltersEngine } = require(workerData.module);
const text = workerData.files.map((f) => fs.readFileSync(f, 'utf8')).join('\\n');
const engine = FiltersEngine.parse(text, { loadNetworkFilters: true, loadCosmeticFilters: true, loadGenericCosmeticsFilters: true, enableCompression: false });
const bytes = engine.serialize();
parentPort.postMessage(bytes, [bytes.buffer]);
`;

function parseInWorker(files: readonly string[]): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { files, module: createRequire(import.meta.url).resolve('@ghostery/adblocker') } });
    worker.once('message', (bytes: Uint8Array) => {
      resolve(bytes);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the filter list parser exited with code ${code}`)));
  });
}

/** One engine over some list files, shared by every browser of the process. */
export class AdBlocker {
  readonly #engine: FiltersEngine;

  private constructor(engine: FiltersEngine) {
    this.#engine = engine;
  }

  static #loaded = new Map<string, Promise<AdBlocker>>();

  /**
   * The engine of `files` (parsed once per process, or read from `cacheDir`, default
   * $XDG_CACHE_HOME or ~/.cache, then agent-task-service-adblock); rejects when a file cannot be read.
   */
  static load(files: readonly string[] = DEFAULT_ADBLOCK_LISTS, cacheDir = defaultCacheDir()): Promise<AdBlocker> {
    const key = [cacheDir, ...files].join('\n');
    let p = AdBlocker.#loaded.get(key);
    if (!p) {
      p = (async () => {
        const hash = createHash('sha256').update(ENGINE_VERSION);
        for (const f of files) hash.update(await fs.promises.readFile(f));
        const cached = path.join(cacheDir, `${hash.digest('hex').slice(0, 32)}.engine`);
        const bytes = await fs.promises.readFile(cached).catch(() => undefined);
        if (bytes) {
          try {
            return new AdBlocker(FiltersEngine.deserialize(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)));
          } catch {
            /* another version's or a damaged file: parsed again below */
          }
        }
        const parsed = await parseInWorker(files);
        await writeAtomically(cached, parsed).catch(() => {}); // a cache that cannot be written only costs the next start a parse
        return new AdBlocker(FiltersEngine.deserialize(parsed));
      })();
      AdBlocker.#loaded.set(key, p);
      p.catch(() => AdBlocker.#loaded.delete(key));
    }
    return p;
  }

  /** For tests: an engine from list text, parsed here. */
  static fromText(text: string): AdBlocker {
    return new AdBlocker(FiltersEngine.parse(text, { loadNetworkFilters: true, loadCosmeticFilters: true, loadGenericCosmeticsFilters: true }));
  }

  /**
   * The rule that blocks a request, or undefined. `url` is the whole URL of an http request, or
   * `https://host/` for a CONNECT (only the host is known: rules with a path, a request type or a
   * first/third-party condition do not match it); `sourceUrl` the page that asked (Referer), when
   * known; `type` what the request is for (see {@link requestType}).
   */
  blocking(url: string, sourceUrl?: string, type: RequestType = 'other'): string | undefined {
    let request: Request;
    try {
      request = Request.fromRawDetails({ url, type, ...(sourceUrl ? { sourceUrl } : {}) });
    } catch {
      return undefined;
    }
    const r = this.#engine.match(request);
    return r.match ? (r.filter?.toString() ?? 'a filter list rule') : undefined;
  }

  /** The hiding stylesheet of a document at `url` from its host's rules and the generic ones (no DOM needed). */
  hostStyles(url: string): string {
    const h = hostOf(url);
    if (!h) return '';
    return this.#engine.getCosmeticsFilters({ url, hostname: h.hostname, domain: h.domain, getBaseRules: true, getRulesFromHostname: true, getRulesFromDOM: false, getInjectionRules: false, getExtendedRules: false }).styles;
  }

  /** The hiding stylesheet of the generic rules that match what the document has (classes, ids, links). */
  domStyles(url: string, dom: { classes: string[]; ids: string[]; hrefs: string[] }): string {
    const h = hostOf(url);
    if (!h) return '';
    const cap = (a: string[]) => a.slice(0, MAX_DOM_TOKENS);
    return this.#engine.getCosmeticsFilters({
      url,
      hostname: h.hostname,
      domain: h.domain,
      classes: cap(dom.classes),
      ids: cap(dom.ids),
      hrefs: cap(dom.hrefs),
      getBaseRules: false,
      getRulesFromHostname: false,
      getRulesFromDOM: true,
      getInjectionRules: false,
      getExtendedRules: false,
    }).styles;
  }
}

const FETCH_DEST: Record<string, RequestType> = {
  document: 'main_frame',
  iframe: 'sub_frame',
  frame: 'sub_frame',
  script: 'script',
  worker: 'script',
  sharedworker: 'script',
  serviceworker: 'script',
  image: 'image',
  style: 'stylesheet',
  font: 'font',
  audio: 'media',
  video: 'media',
  track: 'media',
  object: 'object',
  embed: 'object',
  empty: 'xmlhttprequest',
};

/**
 * What an http request is for, from its headers: `Sec-Fetch-Dest` where Chromium sends it, else
 * the `Accept` Chromium gives each kind (images, style sheets, documents); `*\/*` (scripts and
 * fetches alike) stays unknown, so a rule limited to one of them does not match.
 */
export function requestType(headers: { 'sec-fetch-dest'?: string | string[] | undefined; accept?: string | string[] | undefined }): RequestType {
  const dest = headers['sec-fetch-dest'];
  if (typeof dest === 'string' && FETCH_DEST[dest]) return FETCH_DEST[dest];
  const accept = typeof headers.accept === 'string' ? headers.accept : '';
  if (accept.startsWith('image/')) return 'image';
  if (accept.startsWith('text/css')) return 'stylesheet';
  if (accept.startsWith('text/html')) return 'main_frame';
  return 'other';
}

function hostOf(url: string): { hostname: string; domain: string } | undefined {
  if (!/^https?:\/\//i.test(url)) return undefined;
  try {
    // The engine's own parse: the host and its registrable domain (public suffix list).
    const r = Request.fromRawDetails({ url });
    return r.hostname ? { hostname: r.hostname, domain: r.domain || r.hostname } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs in an isolated world of the frame (a page script cannot see it): adds the stylesheet, and
 * returns the document's classes, ids and links for the generic rules. Source text, sent by CDP.
 */
export function cosmeticScript(css: string, collect: boolean): string {
  return `(() => {
  if (${JSON.stringify(css)}) {
    const s = document.createElement('style');
    s.textContent = ${JSON.stringify(css)};
    (document.head || document.documentElement).appendChild(s);
  }
  if (!${collect}) return null;
  const classes = new Set(), ids = new Set(), hrefs = new Set();
  for (const el of document.querySelectorAll('[class],[id],a[href]')) {
    if (classes.size + ids.size + hrefs.size > ${MAX_DOM_TOKENS * 3}) break;
    for (const c of el.classList) classes.add(c);
    if (el.id) ids.add(el.id);
    const h = el.getAttribute('href');
    if (el.tagName === 'A' && h) hrefs.add(h);
  }
  return JSON.stringify({ classes: [...classes], ids: [...ids], hrefs: [...hrefs] });
})()`;
}
