/**
 * Input from a live viewer: mouse, wheel and keys go to the active tab as CDP Input events (in
 * CSS pixels of the frame); tab actions (activate, navigate, back, forward, reload, new, close)
 * drive the browser chrome the viewer sees.
 */
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from '../../common/src/errors.js';
import type { LiveBrowser } from './live-browser.js';

export type MouseButtonName = 'none' | 'left' | 'middle' | 'right' | 'back' | 'forward';

/** One input event from a viewer. */
export type BrowserInput =
  | { kind: 'mouse'; type: 'mousePressed' | 'mouseReleased' | 'mouseMoved'; x: number; y: number; button: MouseButtonName; clickCount: number; modifiers: number }
  | { kind: 'wheel'; x: number; y: number; deltaX: number; deltaY: number }
  | { kind: 'key'; type: 'keyDown' | 'keyUp' | 'char'; key: string; code: string; text: string; modifiers: number }
  | { kind: 'tab'; action: 'activate' | 'navigate' | 'back' | 'forward' | 'reload' | 'newTab' | 'close'; value: string };

/** Windows virtual key codes of the keys whose editing behaviour Chromium keys on. */
const KEY_CODES: Record<string, number> = {
  Backspace: 8, Tab: 9, Enter: 13, Shift: 16, Control: 17, Alt: 18, Pause: 19, CapsLock: 20, Escape: 27, ' ': 32,
  PageUp: 33, PageDown: 34, End: 35, Home: 36, ArrowLeft: 37, ArrowUp: 38, ArrowRight: 39, ArrowDown: 40, Insert: 45, Delete: 46, Meta: 91,
  F1: 112, F2: 113, F3: 114, F4: 115, F5: 116, F6: 117, F7: 118, F8: 119, F9: 120, F10: 121, F11: 122, F12: 123,
};

function keyCode(key: string, code: string): number | undefined {
  if (KEY_CODES[key] !== undefined) return KEY_CODES[key];
  const m = /^(?:Key([A-Z])|Digit([0-9]))$/.exec(code);
  if (m) return (m[1] ?? m[2])!.charCodeAt(0);
  if (key.length === 1 && /[a-z0-9]/i.test(key)) return key.toUpperCase().charCodeAt(0);
  return undefined;
}

/** A URL typed into the URL bar: web and about:blank only (never file:, chrome:, javascript:…); a bare host gets https://. */
export function navigableUrl(raw: string): string {
  const s = raw.trim();
  if (!s) throw new InvalidArgumentError('A URL is required');
  const withScheme = /^[a-z][a-z0-9+.-]*:/i.test(s) ? s : `https://${s}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    throw new InvalidArgumentError(`Not a URL: ${JSON.stringify(s.slice(0, 200))}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:' && u.href !== 'about:blank') {
    throw new InvalidArgumentError(`Only http and https URLs can be opened (got ${u.protocol})`);
  }
  return u.href;
}

async function activeSession(b: LiveBrowser): Promise<string> {
  const id = b.tabs.activeId;
  if (!id) throw new FailedPreconditionError('The browser has no open tab');
  return b.tabs.session(id);
}

/** Sends one input to the browser's active tab (or to its tab strip). */
export async function dispatchInput(b: LiveBrowser, input: BrowserInput): Promise<void> {
  const conn = b.chromium.conn;
  b.touch();
  switch (input.kind) {
    case 'mouse': {
      const sessionId = await activeSession(b);
      await conn.send(
        'Input.dispatchMouseEvent',
        { type: input.type, x: input.x, y: input.y, button: input.button, clickCount: input.clickCount, modifiers: input.modifiers, buttons: input.type === 'mouseReleased' ? 0 : buttonsMask(input.button) },
        sessionId,
      );
      return;
    }
    case 'wheel': {
      const sessionId = await activeSession(b);
      await conn.send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: input.x, y: input.y, deltaX: input.deltaX, deltaY: input.deltaY }, sessionId);
      return;
    }
    case 'key': {
      const sessionId = await activeSession(b);
      let text = input.text;
      if (input.type !== 'keyUp' && !text && input.key === 'Enter') text = '\r';
      const type = input.type === 'keyDown' && !text ? 'rawKeyDown' : input.type;
      const params: Record<string, unknown> = { type, key: input.key, code: input.code, modifiers: input.modifiers };
      if (type !== 'keyUp' && text) {
        params.text = text;
        params.unmodifiedText = text;
      }
      const vk = keyCode(input.key, input.code);
      if (vk !== undefined) params.windowsVirtualKeyCode = vk;
      await conn.send('Input.dispatchKeyEvent', params, sessionId);
      return;
    }
    case 'tab':
      return tabAction(b, input.action, input.value);
  }
}

function buttonsMask(button: MouseButtonName): number {
  return { none: 0, left: 1, right: 2, middle: 4, back: 8, forward: 16 }[button];
}

async function tabAction(b: LiveBrowser, action: Extract<BrowserInput, { kind: 'tab' }>['action'], value: string): Promise<void> {
  const conn = b.chromium.conn;
  switch (action) {
    case 'activate':
      if (!b.tabs.has(value)) throw new NotFoundError('Tab not found');
      return b.tabs.activate(value);
    case 'navigate': {
      const url = navigableUrl(value);
      const r = await conn.send<{ errorText?: string }>('Page.navigate', { url }, await activeSession(b));
      if (r.errorText) throw new FailedPreconditionError(`Navigation failed: ${r.errorText}`);
      return;
    }
    case 'back':
    case 'forward': {
      const sessionId = await activeSession(b);
      const h = await conn.send<{ currentIndex: number; entries: { id: number }[] }>('Page.getNavigationHistory', {}, sessionId);
      const entry = h.entries[h.currentIndex + (action === 'back' ? -1 : 1)];
      if (entry) await conn.send('Page.navigateToHistoryEntry', { entryId: entry.id }, sessionId);
      return;
    }
    case 'reload':
      await conn.send('Page.reload', {}, await activeSession(b));
      return;
    case 'newTab': {
      const url = value ? navigableUrl(value) : 'about:blank';
      const { targetId } = await conn.send<{ targetId: string }>('Target.createTarget', { url, browserContextId: b.contextId });
      return b.tabs.activate(targetId);
    }
    case 'close': {
      const id = value || b.tabs.activeId;
      if (!id || !b.tabs.has(id)) throw new NotFoundError('Tab not found');
      // Keep one tab open: a browser without tabs has nothing to show or drive.
      if (b.tabs.list().length === 1) await conn.send('Target.createTarget', { url: 'about:blank', browserContextId: b.contextId });
      await conn.send('Target.closeTarget', { targetId: id });
      return;
    }
  }
}
