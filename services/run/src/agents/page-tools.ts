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

/** Inputs whose value has one format (or is a number on a scale): set as the input accepts it, never typed. */
const SET_BY_VALUE: Record<string, string> = { date: 'YYYY-MM-DD', time: 'HH:MM', 'datetime-local': 'YYYY-MM-DDTHH:MM', month: 'YYYY-MM', week: 'YYYY-Www', color: '#rrggbb', range: 'a number' };

const two = (n: number) => String(n).padStart(2, '0');

/**
 * `text` in the format an input of `type` takes (an ISO date for a date input, a number for a
 * slider), or undefined when it cannot be read as one. A date may be written out ("14 March
 * 2025"); an all-numeric date other than ISO is ambiguous (03/04/2025) and refused.
 */
export function inputValue(type: string, text: string): string | undefined {
  const t = text.trim();
  let m: RegExpMatchArray | null;
  const time = (h: number, min: string, sec: string | undefined, ampm: string | undefined) => {
    if (ampm) h = (h % 12) + (/p/i.test(ampm) ? 12 : 0);
    return h < 24 ? `${two(h)}:${min}${sec ? `:${sec}` : ''}` : undefined;
  };
  const TIME = '(\\d{1,2}):(\\d{2})(?::(\\d{2}))?\\s*([ap]\\.?m\\.?)?';
  switch (type) {
    case 'date': {
      if ((m = t.match(/^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})$/))) return `${m[1]}-${two(Number(m[2]))}-${two(Number(m[3]))}`;
      if (!/[a-z]/i.test(t)) return undefined;
      const d = new Date(t);
      return Number.isNaN(d.getTime()) ? undefined : `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
    }
    case 'time':
      return (m = t.match(new RegExp(`^${TIME}$`, 'i'))) ? time(Number(m[1]), m[2]!, m[3], m[4]) : undefined;
    case 'datetime-local': {
      if (!(m = t.match(new RegExp(`^(\\d{4})-(\\d{2})-(\\d{2})[T ]${TIME}$`, 'i')))) return undefined;
      const hm = time(Number(m[4]), m[5]!, m[6], m[7]);
      return hm && `${m[1]}-${m[2]}-${m[3]}T${hm}`;
    }
    case 'month':
      return (m = t.match(/^(\d{4})-(\d{1,2})$/)) ? `${m[1]}-${two(Number(m[2]))}` : undefined;
    case 'week':
      return (m = t.match(/^(\d{4})-?W(\d{1,2})$/i)) ? `${m[1]}-W${two(Number(m[2]))}` : undefined;
    case 'color':
      if ((m = t.match(/^#?([0-9a-f])([0-9a-f])([0-9a-f])$/i))) return `#${m[1]}${m[1]}${m[2]}${m[2]}${m[3]}${m[3]}`.toLowerCase();
      return /^#?[0-9a-f]{6}$/i.test(t) ? `#${t.replace('#', '').toLowerCase()}` : undefined;
    case 'range':
      return /^-?\d+(?:\.\d+)?$/.test(t) ? t : undefined;
    default:
      return undefined;
  }
}

/** What a field holds after an edit, when that is not what was asked (cut by maxlength, reformatted, refused by an editor); undefined when it is. */
function readBackNote(index: number, wanted: string, got: { value: string; secret: boolean }): string | undefined {
  const norm = (v: string) => v.replace(/\s+/g, ' ').trim();
  if (norm(got.value) === norm(wanted)) return undefined;
  // A password field's contents are never repeated, neither what it holds nor what was typed.
  if (got.secret) return `[${index}] now holds ${got.value.length} characters, not the ${wanted.length} typed`;
  const q = (v: string, n: number) => JSON.stringify(v.length > n ? `${v.slice(0, n - 1)}…` : v);
  return `[${index}] now holds ${q(got.value, 200)}, not what was typed (${q(wanted, 80)})`;
}

/**
 * Sets a date, time, month, week, colour or range input to `text` the way the input accepts it:
 * the value in its own format (validated first: a value it would refuse changes nothing), then
 * `input` and `change` as a user's edit fires them. Returns a note when the input holds another
 * value than asked (a slider snaps to its step) or the value is outside its bounds.
 */
async function setFormatted(el: ElementHandle<Element>, index: number, type: string, text: string): Promise<string | undefined> {
  const value = inputValue(type, text);
  const kind = type === 'range' ? 'slider' : `${type} field`;
  if (value === undefined) throw new ActionError(`[${index}] is a ${kind}: give the value as ${SET_BY_VALUE[type]} (not ${JSON.stringify(text)})`);
  const r = await el.evaluate((node, v) => {
    const input = node as HTMLInputElement;
    if (input.disabled || input.readOnly) return { problem: `is ${input.disabled ? 'disabled' : 'read-only'}` };
    // The browser's own sanitising says whether it takes the value: a probe of the same kind and bounds.
    const probe = document.createElement('input');
    probe.type = input.type;
    for (const a of ['min', 'max', 'step']) if (input.hasAttribute(a)) probe.setAttribute(a, input.getAttribute(a)!);
    probe.value = v;
    if (probe.value === '') return { problem: `does not take ${JSON.stringify(v)}` };
    input.focus();
    // The prototype's setter: frameworks that watch the element's own `value` property then see the events' change.
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')!.set!.call(input, v);
    input.dispatchEvent(new Event('input', { bubbles: true }));
    input.dispatchEvent(new Event('change', { bubbles: true }));
    const out = input.validity.rangeUnderflow ? `min=${input.min}` : input.validity.rangeOverflow ? `max=${input.max}` : input.validity.stepMismatch ? `step=${input.step}` : '';
    const bounds = ['min', 'max', 'step'].filter((a) => input.hasAttribute(a)).map((a) => `${a}=${input.getAttribute(a)}`).join(' ');
    return { value: input.value, out, bounds };
  }, value);
  if ('problem' in r) throw new ActionError(`[${index}] ${r.problem}`);
  if (r.value !== value) return `[${index}] now holds ${JSON.stringify(r.value)}, not ${JSON.stringify(value)}: the nearest value the ${kind} allows${r.bounds ? ` (${r.bounds})` : ''}`;
  if (r.out) return `[${index}] holds ${JSON.stringify(r.value)}, which is outside what the ${kind} allows (${r.out})`;
  return undefined;
}

/**
 * Empties a field as a person does: selects its contents and deletes them with a key, so the page
 * sees input events (a framework's state and a rich editor's own model follow; setting the DOM
 * would be undone by an editor that restores its content, as Lexical does).
 */
async function clearField(page: Page, el: ElementHandle<Element>): Promise<void> {
  const selectAll = () =>
    el.evaluate((node) => {
      const input = node as HTMLInputElement;
      input.focus();
      if (node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement) {
        if (!node.value) return false;
        node.select();
        return true;
      }
      if (!(node as HTMLElement).innerText.trim()) return false;
      const sel = (node.getRootNode() as Document).getSelection?.() ?? document.getSelection();
      const range = document.createRange();
      range.selectNodeContents(node);
      sel?.removeAllRanges();
      sel?.addRange(range);
      return true;
    });
  if (!(await selectAll())) return;
  await page.keyboard.press('Backspace');
  // A field that kept text (no selection support) is emptied through its value, with the event a framework listens to.
  await el.evaluate((node) => {
    if (!(node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement) || !node.value) return;
    Object.getOwnPropertyDescriptor(Object.getPrototypeOf(node), 'value')!.set!.call(node, '');
    node.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'deleteContentBackward' }));
  });
}

/**
 * Replaces the text of a field (or an editable element) with `text`: a field with a format (date,
 * slider, …) is set to the value it takes; a text field is emptied as a person does and typed
 * into key by key; a rich editor (contenteditable) gets the text through `Input.insertText`, as
 * an input method gives it. Returns a note when the field then holds something else.
 */
export async function typeInto(page: Page, index: number, text: string, submit: boolean, timeoutMs: number): Promise<string | undefined> {
  const note = await withElement(page, index, async (el) => {
    const kind = await el.evaluate((node) => ({
      type: node instanceof HTMLInputElement ? node.type : '',
      field: node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement,
      editable: (node as HTMLElement).isContentEditable,
      slider: node.getAttribute('role') === 'slider',
    }));
    if (SET_BY_VALUE[kind.type]) return setFormatted(el, index, kind.type, text);
    // A slider the page draws itself takes no text: it moves by its thumb or its arrow keys.
    if (kind.slider && !kind.field) throw new ActionError(`[${index}] is a slider the page draws itself and takes no typed value: drag its thumb (drag with dx) or press ArrowRight/ArrowLeft on it`);
    await clearField(page, el);
    if (kind.field || !kind.editable) await el.type(text);
    else {
      const lines = text.split('\n');
      for (const [i, line] of lines.entries()) {
        if (i > 0) await page.keyboard.press('Enter');
        if (line) await page.keyboard.sendCharacter(line);
      }
    }
    const got = await el.evaluate((node) => ({
      value: node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement ? node.value : (node as HTMLElement).innerText,
      secret: node instanceof HTMLInputElement && node.type === 'password',
    }));
    return readBackNote(index, text, got);
  });
  if (submit) await page.keyboard.press('Enter');
  await settlePage(page, timeoutMs);
  return note;
}

/**
 * Chooses the option of a <select> whose text (or value) is `option`, else the first that contains
 * it; on a date, time, colour or range input, sets that value (as `type` does).
 */
export async function selectOption(page: Page, index: number, option: string, timeoutMs: number): Promise<string | undefined> {
  const note = await withElement(page, index, async (el) => {
    const type = await el.evaluate((node) => (node instanceof HTMLInputElement ? node.type : ''));
    if (SET_BY_VALUE[type]) return setFormatted(el, index, type, option);
    const value = await el.evaluate((node, wanted) => {
      const sel = node as HTMLSelectElement;
      const w = wanted.toLowerCase();
      const opt = Array.from(sel.options ?? []).find((o) => o.text.trim().toLowerCase() === w || o.value.toLowerCase() === w) ?? Array.from(sel.options ?? []).find((o) => o.text.toLowerCase().includes(w));
      return opt ? opt.value : null;
    }, option);
    if (value === null) throw new ActionError(`[${index}] has no option ${JSON.stringify(option)}`);
    await el.select(value);
    return undefined;
  });
  await settlePage(page, timeoutMs);
  return note;
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

type Key = Parameters<Page['keyboard']['press']>[0];
const MODIFIERS: Record<string, 'Control' | 'Shift' | 'Alt' | 'Meta'> = { control: 'Control', ctrl: 'Control', ctl: 'Control', shift: 'Shift', alt: 'Alt', option: 'Alt', opt: 'Alt', meta: 'Meta', cmd: 'Meta', command: 'Meta', super: 'Meta', win: 'Meta' };
const KEY_NAMES: Record<string, string> = { esc: 'Escape', return: 'Enter', del: 'Delete', space: ' ', spacebar: ' ', up: 'ArrowUp', down: 'ArrowDown', left: 'ArrowLeft', right: 'ArrowRight', pgup: 'PageUp', pgdn: 'PageDown', plus: '+' };

/**
 * Presses a key or a combination ("Enter", "Control+A", "Shift+Tab", "Meta+C"): the modifiers
 * are held while the key is pressed. Meta (Cmd) means the platform's command key: on a browser
 * that is not a Mac's, shortcuts take Control, so Meta+<key> is pressed as Control+<key> and the
 * note says so. A letter is pressed as its lower-case key unless Shift is held, as a keyboard does.
 */
export async function pressKeys(page: Page, combo: string, timeoutMs: number): Promise<string | undefined> {
  // " " is the space bar, not an empty key.
  const parts = (combo.trim() || combo).split(/\s*\+\s*(?=.)/);
  const key0 = parts.pop() ?? '';
  const mods = parts.map((p) => MODIFIERS[p.toLowerCase()]);
  const unknown = parts.find((_, i) => !mods[i]);
  if (unknown !== undefined || !key0) throw new ActionError(`Unknown key combination ${JSON.stringify(combo)}: write it like Enter, Tab, ArrowDown, Control+A, Shift+Tab or Meta+C`);
  let note: string | undefined;
  if (mods.includes('Meta') && !(await page.evaluate(() => /mac/i.test(navigator.platform)).catch(() => false))) {
    note = `pressed ${combo.replace(/\b(?:meta|cmd|command|super|win)\b/i, 'Control')}: this browser is not a Mac's, so its shortcuts use Control where a Mac's use Meta (Cmd)`;
    for (let i = 0; i < mods.length; i++) if (mods[i] === 'Meta') mods[i] = 'Control';
  }
  let key = KEY_NAMES[key0.toLowerCase()] ?? key0;
  if (/^[a-z]$/i.test(key)) key = mods.includes('Shift') ? key.toUpperCase() : key.toLowerCase();
  else if (!/^.$/.test(key)) key = key[0]!.toUpperCase() + key.slice(1);
  const held: Key[] = [];
  try {
    for (const m of new Set(mods)) {
      await page.keyboard.down(m);
      held.push(m);
    }
    await page.keyboard.press(key as Key);
  } catch (err) {
    if (!/Unknown key/.test((err as Error).message)) throw err;
    throw new ActionError(`Unknown key ${JSON.stringify(key0)} in ${JSON.stringify(combo)}: keys are named like Enter, Tab, Escape, ArrowDown, PageDown, F5 or a single character`);
  } finally {
    for (const m of held.reverse()) await page.keyboard.up(m).catch(() => undefined);
  }
  await settlePage(page, timeoutMs);
  return note;
}

/** Brings an element into view only as far as needed (what is on screen stays put). */
const reveal = (el: ElementHandle<Element>) => el.evaluate((n) => n.scrollIntoView({ block: 'nearest', inline: 'nearest' })).catch(() => undefined);

/** Where on screen to point at an element: the centre of its part inside the viewport. */
async function centreOf(page: Page, el: ElementHandle<Element>, index: number): Promise<{ x: number; y: number }> {
  const box = await el.boundingBox();
  const vp = page.viewport() ?? (await page.evaluate(() => ({ width: window.innerWidth, height: window.innerHeight })));
  if (!box || box.width === 0 || box.height === 0) throw new ActionError(`[${index}] is not visible on the page`);
  const left = Math.max(0, box.x);
  const top = Math.max(0, box.y);
  const right = Math.min(vp.width, box.x + box.width);
  const bottom = Math.min(vp.height, box.y + box.height);
  if (right <= left || bottom <= top) throw new ActionError(`[${index}] is outside the visible part of the page`);
  return { x: (left + right) / 2, y: (top + bottom) / 2 };
}

/** Runs in the page: the box that scrolls `node` (itself or its nearest scrolling ancestor), as pixels hidden above and below, and its height. */
function scrollerState(node: Element): { above: number; below: number; height: number; page: boolean } {
  for (let e: Element | null = node; e; e = e.parentElement ?? ((e.getRootNode() as ShadowRoot).host ?? null)) {
    const oy = getComputedStyle(e).overflowY;
    if (e !== document.body && e !== document.documentElement && /auto|scroll|overlay/.test(oy) && e.scrollHeight > e.clientHeight + 2) {
      return { above: Math.round(e.scrollTop), below: Math.max(0, Math.round(e.scrollHeight - e.clientHeight - e.scrollTop)), height: e.clientHeight, page: false };
    }
  }
  const root = document.scrollingElement ?? document.documentElement;
  return { above: Math.round(root.scrollTop), below: Math.max(0, Math.round(root.scrollHeight - window.innerHeight - root.scrollTop)), height: window.innerHeight, page: true };
}

/**
 * Scrolls the scroll container [index] (or the one holding it) as a person does: a mouse wheel
 * over its visible centre, so the page's wheel and scroll listeners (lazy loaders, infinite
 * feeds) run; then waits for what that loads. Returns a note when nothing moved.
 */
export async function scrollWithin(page: Page, index: number, direction: 'down' | 'up' | 'bottom' | 'top', timeoutMs: number): Promise<string | undefined> {
  return withElement(page, index, async (el) => {
    await reveal(el);
    const at = await centreOf(page, el, index);
    const before = await el.evaluate(scrollerState);
    const span = direction === 'down' || direction === 'up' ? Math.round(before.height * 0.8) : before.above + before.below + before.height;
    await page.mouse.move(at.x, at.y);
    await page.mouse.wheel({ deltaY: direction === 'down' || direction === 'bottom' ? span : -span });
    // The wheel scrolls on the compositor: wait (a few frames at most) until the position shows it.
    const end = Date.now() + 500;
    while ((await el.evaluate(scrollerState)).above === before.above && Date.now() < end) await page.evaluate(() => new Promise((r) => requestAnimationFrame(r)));
    await settlePage(page, timeoutMs);
    const after = await el.evaluate(scrollerState);
    if (after.above !== before.above) return undefined;
    const what = before.page ? 'the page' : `[${index}]`;
    return direction === 'down' || direction === 'bottom'
      ? `${what} did not scroll: it is at its bottom (${after.below} px below)`
      : `${what} did not scroll: it is at its top`;
  });
}

/** Where a drag goes: onto the element [to], or by an offset in pixels. */
export interface DragTarget {
  to?: number | undefined;
  dx?: number | undefined;
  dy?: number | undefined;
}

/**
 * Drags [index] as a person does with a mouse: press on it, move in steps, release. When the
 * page starts an HTML5 drag (a sortable list's draggable items), the browser hands the drag to us
 * (CDP drag interception) and it continues as drag events (dragenter, dragover, drop, then
 * dragend on the source); otherwise the moves stay mouse moves (a scripted slider's thumb).
 */
export async function dragElement(page: Page, index: number, target: DragTarget, timeoutMs: number): Promise<void> {
  const byOffset = target.dx !== undefined || target.dy !== undefined;
  if ((target.to === undefined) === !byOffset) throw new ActionError('A drag needs either "to" (the [index] to drop on) or an offset "dx"/"dy" in pixels, not both');
  if (target.to === index) throw new ActionError(`[${index}] cannot be dropped onto itself`);
  const source = await element(page, index);
  const dest = target.to !== undefined ? await element(page, target.to) : undefined;
  const session = await page.createCDPSession();
  try {
    await reveal(source);
    if (dest) await reveal(dest);
    const from = await centreOf(page, source, index);
    const to = dest ? await centreOf(page, dest, target.to!) : { x: from.x + (target.dx ?? 0), y: from.y + (target.dy ?? 0) };
    let data: unknown;
    session.on('Input.dragIntercepted', (e) => void (data = e.data));
    await session.send('Input.setInterceptDrags', { enabled: true });
    const mouse = (type: 'mouseMoved' | 'mousePressed' | 'mouseReleased', p: { x: number; y: number }, buttons: number) =>
      session.send('Input.dispatchMouseEvent', { type, x: p.x, y: p.y, button: 'left', buttons, ...(type === 'mouseMoved' ? {} : { clickCount: 1 }) });
    await mouse('mouseMoved', from, 0);
    await mouse('mousePressed', from, 1);
    let entered = false;
    const STEPS = 10;
    for (let i = 1; i <= STEPS; i++) {
      const p = { x: from.x + ((to.x - from.x) * i) / STEPS, y: from.y + ((to.y - from.y) * i) / STEPS };
      if (data === undefined) await mouse('mouseMoved', p, 1);
      else {
        await session.send('Input.dispatchDragEvent', { type: entered ? 'dragOver' : 'dragEnter', x: p.x, y: p.y, data: data as never });
        entered = true;
      }
    }
    // The drag may start as the last move lands: a frame later the browser has said so, or never will.
    if (data === undefined) await page.evaluate(() => new Promise((r) => requestAnimationFrame(r))).catch(() => undefined);
    if (data !== undefined) {
      if (!entered) await session.send('Input.dispatchDragEvent', { type: 'dragEnter', x: to.x, y: to.y, data: data as never });
      await session.send('Input.dispatchDragEvent', { type: 'dragOver', x: to.x, y: to.y, data: data as never });
      await session.send('Input.dispatchDragEvent', { type: 'drop', x: to.x, y: to.y, data: data as never });
    }
    await mouse('mouseReleased', to, 0);
  } finally {
    await session.send('Input.setInterceptDrags', { enabled: false }).catch(() => undefined);
    await session.detach().catch(() => undefined);
    await source.dispose().catch(() => undefined);
    await dest?.dispose().catch(() => undefined);
  }
  await settlePage(page, timeoutMs);
}
