/**
 * Observing a page and acting on it with puppeteer-core. Interactive elements get a stable index
 * (a data attribute that survives re-observation of the same document), so a model can name
 * "[3]" and mean the same element in the next step.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Browser, ElementHandle, Page } from 'puppeteer-core';
import { InvalidArgumentError } from '../../../common/src/errors.js';
import type { Action } from './actions.js';
import { findIndexed, observePage, settlePage, type Observation } from './observe.js';
import { deliverExtract, extract, ExtractError, findText, type AskPage } from './page-extract.js';
import { insideDisk } from './shell.js';

export type { Observation, PageElement } from './observe.js';

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

/** What the model sees of the tab `page` (see observe.ts). */
export async function observe(browser: Browser, page: Page): Promise<Observation> {
  return observePage(browser, page);
}

async function element(page: Page, index: number): Promise<ElementHandle<Element>> {
  const handle = await findIndexed(page, index);
  if (!handle) throw new ActionError(`There is no element [${index}] on the page any more`);
  return handle;
}

/** Waits until the page has settled after a click, a key, a submit: network idle and a quiet DOM, both bounded. */
async function settle(page: Page, timeoutMs: number): Promise<void> {
  await settlePage(page, timeoutMs);
}

export interface ActResult {
  /** The page to observe next (switching tabs changes it). */
  page: Page;
  /** What an extraction returned, for the model and the answer. */
  extracted?: string;
}

export interface ActOptions {
  /** Where disk files live (uploads); paths never leave it. */
  diskDir?: string | undefined;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Answers `extract` questions (an LLM's separate call); without it only deterministic extractions work. */
  ask?: AskPage | undefined;
}

/** Carries out one action (not `done`). */
export async function act(browser: Browser, page: Page, action: Action, opts: ActOptions): Promise<ActResult> {
  const t = opts.timeoutMs;
  switch (action.name) {
    case 'navigate': {
      let url = action.url.trim();
      if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) url = `https://${url}`;
      // The browser refuses the rest too (file:, chrome:, …): it is confined to the web.
      if (!/^https?:|^about:blank$|^data:/i.test(url)) throw new ActionError(`Cannot open ${url}: ${url.split(':')[0]}: URLs are blocked in this browser (only http and https)`);
      await page.goto(url, { waitUntil: 'load', timeout: t }).catch((err: Error) => {
        throw new ActionError(`Could not open ${url}: ${err.message.split('\n')[0]}`);
      });
      return { page };
    }
    case 'click': {
      const el = await element(page, action.index);
      const before = (await browser.pages()).length;
      await el.click().catch((err: Error) => {
        throw new ActionError(`Could not click [${action.index}]: ${err.message.split('\n')[0]}`);
      });
      await settle(page, t);
      const pages = await browser.pages();
      // A link that opened a new tab: follow it.
      if (pages.length > before) {
        const opened = pages[pages.length - 1]!;
        await opened.bringToFront();
        await opened.waitForNetworkIdle({ idleTime: 150, timeout: t }).catch(() => undefined);
        return { page: opened };
      }
      return { page };
    }
    case 'type': {
      const el = await element(page, action.index);
      await el.evaluate((node) => {
        const input = node as HTMLInputElement;
        input.focus();
        if ('value' in input) input.value = '';
        else (node as HTMLElement).textContent = '';
      });
      await el.type(action.text);
      if (action.submit) await page.keyboard.press('Enter');
      await settle(page, t);
      return { page };
    }
    case 'select': {
      const el = await element(page, action.index);
      const value = await el.evaluate((node, wanted) => {
        const sel = node as HTMLSelectElement;
        const w = wanted.toLowerCase();
        const opt = Array.from(sel.options ?? []).find((o) => o.text.trim().toLowerCase() === w || o.value.toLowerCase() === w) ?? Array.from(sel.options ?? []).find((o) => o.text.toLowerCase().includes(w));
        return opt ? opt.value : null;
      }, action.option);
      if (value === null) throw new ActionError(`[${action.index}] has no option ${JSON.stringify(action.option)}`);
      await el.select(value);
      await settle(page, t);
      return { page };
    }
    case 'press':
      await page.keyboard.press(action.key as Parameters<Page['keyboard']['press']>[0]).catch(() => {
        throw new ActionError(`Unknown key ${action.key}`);
      });
      await settle(page, t);
      return { page };
    case 'scroll':
      await page.evaluate((d) => {
        if (d === 'bottom') window.scrollTo(0, document.body.scrollHeight);
        else if (d === 'top') window.scrollTo(0, 0);
        else window.scrollBy(0, (d === 'down' ? 1 : -1) * window.innerHeight * 0.8);
      }, action.direction);
      return { page };
    case 'back':
      await page.goBack({ waitUntil: 'load', timeout: t });
      return { page };
    case 'wait':
      if (action.text !== undefined) {
        await page.waitForFunction((text: string) => document.body?.innerText.includes(text), { timeout: t, signal: opts.signal } as never, action.text).catch(() => {
          throw new ActionError(`The text ${JSON.stringify(action.text)} did not appear within ${Math.round(t / 1000)} s`);
        });
      } else {
        await new Promise((r) => setTimeout(r, Math.min(10, Math.max(0, action.seconds ?? 1)) * 1000));
      }
      return { page };
    case 'extract': {
      const scope = { page, element: action.index !== undefined ? await element(page, action.index) : undefined };
      const r = await extract(scope, action, opts.ask)
        .catch((err: unknown) => {
          throw err instanceof ExtractError ? new ActionError(err.message) : err;
        })
        .finally(() => scope.element?.dispose().catch(() => undefined));
      return { page, extracted: await deliverExtract(r.text, r.kind, opts.diskDir) };
    }
    case 'find_text':
      return {
        page,
        extracted: await findText(page, action.text).catch((err: unknown) => {
          throw err instanceof ExtractError ? new ActionError(err.message) : err;
        }),
      };
    case 'switch_tab': {
      const pages = (await browser.pages()).filter((p) => !p.isClosed());
      const target = pages[action.tab];
      if (!target) throw new ActionError(`There is no tab ${action.tab}`);
      await target.bringToFront();
      return { page: target };
    }
    case 'upload': {
      if (!opts.diskDir) throw new ActionError('This run has no disk to upload from');
      const el = (await element(page, action.index)) as ElementHandle<HTMLInputElement>;
      await setInputFile(el, await readUpload(opts.diskDir, action.path));
      return { page };
    }
    case 'shell':
    case 'write_file':
    case 'read_file':
    case 'list_files':
      throw new ActionError(`${action.name} is not a browser action`);
    case 'done':
      return { page };
  }
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
