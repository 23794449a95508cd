/**
 * Acting on a page with puppeteer-core: the browser actions' implementations (the table in
 * actions.ts says which action uses which). Interactive elements get a stable index (a data
 * attribute that survives re-observation of the same document), so a model can name "[3]" and
 * mean the same element in the next step.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Browser, ElementHandle, Page } from 'puppeteer-core';
import { InvalidArgumentError } from '../../../common/src/errors.js';
import { findIndexed, settlePage } from './observe.js';
import { insideDisk } from './shell.js';
import { EGRESS_FAILURE_HEADER, PROXY_NET_ERRORS } from '../../../browser-pool/src/client/egress.js';


/** An action's failure the agent can report (element gone, timeout, …), not a service bug. */
export class ActionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = this.constructor.name;
  }
}

/** The page the agent works in: the visible tab, else the last one. */
export async function activePage(browser: Browser): Promise<Page> {
  const pages = (await browser.pages()).filter((p) => !p.isClosed());
  for (const p of pages) {
    if (await p.evaluate(() => document.visibilityState === 'visible').catch(() => false)) return p;
  }
  return pages[pages.length - 1] ?? (await browser.newPage());
}

/** The element [index] of the page, in whichever frame or shadow root it is (the caller disposes of it). */
export async function element(page: Page, index: number): Promise<ElementHandle<Element>> {
  const handle = await findIndexed(page, index);
  if (!handle) throw new ActionError(`There is no element [${index}] on the page any more`);
  return handle;
}

/** Runs `fn` on the element [index], then lets the page forget the handle. */
async function withElement<T>(page: Page, index: number, fn: (el: ElementHandle<Element>) => Promise<T>): Promise<T> {
  const el = await element(page, index);
  try {
    return await fn(el);
  } finally {
    await el.dispose().catch(() => undefined);
  }
}

/** Clicks [index]; a link that opened a new tab is followed (the returned page). */
export async function clickElement(browser: Browser, page: Page, index: number, timeoutMs: number): Promise<Page> {
  const before = (await browser.pages()).length;
  await withElement(page, index, (el) =>
    el.click().catch((err: Error) => {
      throw new ActionError(`Could not click [${index}]: ${err.message.split('\n')[0]}`);
    }),
  );
  await settlePage(page, timeoutMs);
  const pages = await browser.pages();
  if (pages.length <= before) return page;
  const opened = pages[pages.length - 1]!;
  await opened.bringToFront();
  await opened.waitForNetworkIdle({ idleTime: 150, timeout: timeoutMs }).catch(() => undefined);
  return opened;
}

/** Replaces the text of a field (or an editable element) with `text`, as keystrokes. */
export async function typeInto(page: Page, index: number, text: string, submit: boolean, timeoutMs: number): Promise<void> {
  await withElement(page, index, async (el) => {
    await el.evaluate((node) => {
      const input = node as HTMLInputElement;
      input.focus();
      if ('value' in input) input.value = '';
      else (node as HTMLElement).textContent = '';
    });
    await el.type(text);
  });
  if (submit) await page.keyboard.press('Enter');
  await settlePage(page, timeoutMs);
}

/** Chooses the option of a <select> whose text (or value) is `option`, else the first that contains it. */
export async function selectOption(page: Page, index: number, option: string, timeoutMs: number): Promise<void> {
  await withElement(page, index, async (el) => {
    const value = await el.evaluate((node, wanted) => {
      const sel = node as HTMLSelectElement;
      const w = wanted.toLowerCase();
      const opt = Array.from(sel.options ?? []).find((o) => o.text.trim().toLowerCase() === w || o.value.toLowerCase() === w) ?? Array.from(sel.options ?? []).find((o) => o.text.toLowerCase().includes(w));
      return opt ? opt.value : null;
    }, option);
    if (value === null) throw new ActionError(`[${index}] has no option ${JSON.stringify(option)}`);
    await el.select(value);
  });
  await settlePage(page, timeoutMs);
}

/** Opens `raw` (a bare host gets https://); only web URLs: the browser is confined to the web. */
export async function openUrl(page: Page, raw: string, timeoutMs: number): Promise<void> {
  let url = raw.trim();
  if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) url = `https://${url}`;
  if (!/^https?:|^about:blank$|^data:/i.test(url)) throw new ActionError(`Cannot open ${url}: ${url.split(':')[0]}: URLs are blocked in this browser (only http and https)`);
  const res = await page.goto(url, { waitUntil: 'load', timeout: timeoutMs }).catch((err: Error) => {
    throw new ActionError(navigationError(url, err.message.split('\n')[0]!));
  });
  const why = res?.headers()[EGRESS_FAILURE_HEADER];
  if (why) throw new ActionError(`Could not open ${url}: ${hostOf(url)} could not be reached through the browser's egress proxy (${why})`);
}

const hostOf = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
};

/**
 * Why a navigation failed, in words: every request of a browser goes through its egress proxy, so
 * Chromium's bare code for a site the proxy could not reach ("net::ERR_TUNNEL_CONNECTION_FAILED",
 * which is all an offline service shows) is told as that, the code kept after it.
 */
export function navigationError(url: string, message: string): string {
  const code = /net::ERR_[A-Z_]+/.exec(message)?.[0];
  const why = code && PROXY_NET_ERRORS[code];
  return why ? `Could not open ${url}: ${hostOf(url)} could not be reached through the browser's egress proxy: ${why} (${code})` : `Could not open ${url}: ${message}`;
}

/** Waits for a text to show, or a number of seconds (at most 10). */
export async function waitOn(page: Page, w: { text?: string | undefined; seconds?: number | undefined }, timeoutMs: number, signal: AbortSignal): Promise<void> {
  if (w.text === undefined) {
    await new Promise((r) => setTimeout(r, Math.min(10, Math.max(0, w.seconds ?? 1)) * 1000));
    return;
  }
  await page.waitForFunction((text: string) => document.body?.innerText.includes(text), { timeout: timeoutMs, signal } as never, w.text).catch(() => {
    throw new ActionError(`The text ${JSON.stringify(w.text)} did not appear within ${Math.round(timeoutMs / 1000)} s`);
  });
}

/** Puts a file of the run's disk into the file input [index]. */
export async function uploadFile(page: Page, index: number, diskDir: string | undefined, p: string): Promise<void> {
  if (!diskDir) throw new ActionError('This run has no disk to upload from');
  const file = await readUpload(diskDir, p);
  await withElement(page, index, (el) => setInputFile(el as ElementHandle<HTMLInputElement>, file));
}

/** Largest file the agent uploads into a page (its bytes travel over CDP). */
export const MAX_UPLOAD_BYTES = 50 * 1024 * 1024;

const UPLOAD_TYPES: Record<string, string> = {
  '.txt': 'text/plain', '.csv': 'text/csv', '.json': 'application/json', '.html': 'text/html', '.pdf': 'application/pdf',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp', '.zip': 'application/zip',
};

/** A file of the run's disk to upload: name, type and bytes (never a path outside the disk). */
async function readUpload(diskDir: string, p: string): Promise<{ name: string; type: string; base64: string }> {
  let full: string;
  try {
    full = await insideDisk(path.resolve(diskDir), p);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  const st = await fs.stat(full).catch(() => undefined);
  if (!st?.isFile()) throw new ActionError(`${p} is not a file on the disk`);
  if (st.size > MAX_UPLOAD_BYTES) throw new ActionError(`${p} is ${st.size} bytes; files up to ${MAX_UPLOAD_BYTES} bytes can be uploaded`);
  const name = path.basename(full);
  return { name, type: UPLOAD_TYPES[path.extname(name).toLowerCase()] ?? '', base64: (await fs.readFile(full)).toString('base64') };
}

/**
 * Puts the file into a file input as a user's choice would: its bytes go over CDP into the page
 * (the browser is confined and reads no host path), then `input` and `change` fire.
 */
async function setInputFile(el: ElementHandle<HTMLInputElement>, f: { name: string; type: string; base64: string }): Promise<void> {
  const problem = await el.evaluate((input, file) => {
    if (!(input instanceof HTMLInputElement) || input.type !== 'file') return 'That element is not a file input';
    if (input.disabled) return 'That file input is disabled';
    const bin = atob(file.base64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], file.name, { type: file.type }));
    input.files = dt.files;
    input.dispatchEvent(new Event('input', { bubbles: true }));
    input.dispatchEvent(new Event('change', { bubbles: true }));
    return '';
  }, f);
  if (problem) throw new ActionError(problem);
}
