/**
 * The live view WebSocket protocol, shared by the page and the server.
 *
 * Server → viewer: binary messages are frames (a 16-byte header, then the JPEG); text messages
 * are JSON (`hello`, `state`, `ended`, `error`). Viewer → server: JSON text (`ack` after a
 * frame is drawn, and input: `mouse`, `wheel`, `key`, `tab`). Input coordinates are CSS pixels
 * of the browser's screen (the frame's width × height), already mapped back by the page.
 */
import {
  KeyEventType,
  MouseButton,
  MouseEventType,
  type DispatchInputRequest,
  type StreamFramesResponse,
  type TabAction,
} from '../../../gen/ats/browserpool/v1/browser_pool.js';

/** Header: u8 kind (1 = frame), u8 0, u16 width, u16 height, u16 0, f64 CDP frame time in ms (all little-endian). */
export const FRAME_HEADER_BYTES = 16;

/** WebSocket close codes the page turns into states. */
export const CloseCode = {
  ended: 1000,
  goingAway: 1001,
  badMessage: 1008,
  tokenExpired: 4001,
  tokenInvalid: 4003,
  notFound: 4004,
  tooManyViewers: 4008,
  unavailable: 4013,
} as const;

/** One frame as it goes to every viewer: built once, sent as is. */
export function framePacket(f: Pick<StreamFramesResponse, 'jpeg' | 'width' | 'height' | 'timestampMs'>): Buffer {
  const packet = Buffer.allocUnsafe(FRAME_HEADER_BYTES + f.jpeg.length);
  packet.writeUInt8(1, 0);
  packet.writeUInt8(0, 1);
  packet.writeUInt16LE(Math.max(0, Math.min(65535, f.width)), 2);
  packet.writeUInt16LE(Math.max(0, Math.min(65535, f.height)), 4);
  packet.writeUInt16LE(0, 6);
  packet.writeDoubleLE(f.timestampMs, 8);
  f.jpeg.copy(packet, FRAME_HEADER_BYTES);
  return packet;
}

/** Reads a frame packet's header (viewers written in Node: tests and the benchmark). */
export function readFrameHeader(packet: Buffer): { width: number; height: number; timestampMs: number; jpeg: Buffer } {
  return { width: packet.readUInt16LE(2), height: packet.readUInt16LE(4), timestampMs: packet.readDoubleLE(8), jpeg: packet.subarray(FRAME_HEADER_BYTES) };
}

/** What the chrome of the page shows: the active tab and the tab strip. */
export interface BrowserState {
  url: string;
  title: string;
  tabs: { id: string; url: string; title: string; active: boolean }[];
}

export type ServerMessage =
  | { t: 'hello'; mode: 'interactive' | 'view' }
  | ({ t: 'state' } & BrowserState)
  | { t: 'ended'; reason: 'stopped' | 'not_found' }
  | { t: 'error'; code: 'view_only' | 'input_failed' | 'bad_message' | 'busy'; message: string };

export type TabActionName = 'activate' | 'navigate' | 'back' | 'forward' | 'reload' | 'new' | 'close';

export type ViewerInput =
  | { t: 'mouse'; type: 'down' | 'up' | 'move'; x: number; y: number; button: 'none' | 'left' | 'middle' | 'right' | 'back' | 'forward'; clicks: number; mods: number }
  | { t: 'wheel'; x: number; y: number; dx: number; dy: number }
  | { t: 'key'; type: 'down' | 'up' | 'char'; key: string; code: string; text: string; mods: number }
  | { t: 'tab'; action: TabActionName; value: string };

export type ClientMessage = { t: 'ack' } | ViewerInput;

/** A message the server cannot use; the reason is safe to send back. */
export class BadMessage extends Error {}

const COORD_LIMIT = 100_000;
const MOUSE_TYPES = { down: MouseEventType.MOUSE_EVENT_TYPE_PRESSED, up: MouseEventType.MOUSE_EVENT_TYPE_RELEASED, move: MouseEventType.MOUSE_EVENT_TYPE_MOVED } as const;
const BUTTONS = {
  none: MouseButton.MOUSE_BUTTON_UNSPECIFIED,
  left: MouseButton.MOUSE_BUTTON_LEFT,
  middle: MouseButton.MOUSE_BUTTON_MIDDLE,
  right: MouseButton.MOUSE_BUTTON_RIGHT,
  back: MouseButton.MOUSE_BUTTON_BACK,
  forward: MouseButton.MOUSE_BUTTON_FORWARD,
} as const;
const KEY_TYPES = { down: KeyEventType.KEY_EVENT_TYPE_DOWN, up: KeyEventType.KEY_EVENT_TYPE_UP, char: KeyEventType.KEY_EVENT_TYPE_CHAR } as const;
const TAB_ACTIONS: readonly TabActionName[] = ['activate', 'navigate', 'back', 'forward', 'reload', 'new', 'close'];

function num(v: unknown, name: string, limit = COORD_LIMIT): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || Math.abs(v) > limit) throw new BadMessage(`${name} must be a number`);
  return v;
}
function int(v: unknown, name: string, min: number, max: number, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new BadMessage(`${name} must be an integer from ${min} to ${max}`);
  return v;
}
function text(v: unknown, name: string, max: number): string {
  if (v === undefined) return '';
  if (typeof v !== 'string' || v.length > max) throw new BadMessage(`${name} must be a string of at most ${max} characters`);
  return v;
}
function oneOf<T extends string>(v: unknown, name: string, values: readonly T[]): T {
  if (typeof v !== 'string' || !values.includes(v as T)) throw new BadMessage(`${name} must be one of ${values.join(', ')}`);
  return v as T;
}

/** Parses one text message from a viewer; throws BadMessage. */
export function parseClientMessage(raw: string): ClientMessage {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    throw new BadMessage('Messages must be JSON');
  }
  if (!m || typeof m !== 'object' || Array.isArray(m)) throw new BadMessage('Messages must be JSON objects');
  switch (m.t) {
    case 'ack':
      return { t: 'ack' };
    case 'mouse':
      return {
        t: 'mouse',
        type: oneOf(m.type, 'type', ['down', 'up', 'move'] as const),
        x: num(m.x, 'x'),
        y: num(m.y, 'y'),
        button: oneOf(m.button ?? 'none', 'button', Object.keys(BUTTONS) as (keyof typeof BUTTONS)[]),
        clicks: int(m.clicks, 'clicks', 0, 3, m.type === 'move' ? 0 : 1),
        mods: int(m.mods, 'mods', 0, 15, 0),
      };
    case 'wheel':
      return { t: 'wheel', x: num(m.x, 'x'), y: num(m.y, 'y'), dx: num(m.dx ?? 0, 'dx'), dy: num(m.dy ?? 0, 'dy') };
    case 'key':
      return {
        t: 'key',
        type: oneOf(m.type, 'type', ['down', 'up', 'char'] as const),
        key: text(m.key, 'key', 64),
        code: text(m.code, 'code', 64),
        text: text(m.text, 'text', 16),
        mods: int(m.mods, 'mods', 0, 15, 0),
      };
    case 'tab':
      return { t: 'tab', action: oneOf(m.action, 'action', TAB_ACTIONS), value: text(m.value, 'value', 8192) };
    default:
      throw new BadMessage('Unknown message type');
  }
}

function tabAction(action: TabActionName, value: string): TabAction {
  switch (action) {
    case 'activate':
      return { activateTabId: value };
    case 'navigate':
      return { navigateUrl: value };
    case 'back':
      return { back: true };
    case 'forward':
      return { forward: true };
    case 'reload':
      return { reload: true };
    case 'new':
      return { newTabUrl: value };
    case 'close':
      return { closeTabId: value };
  }
}

/** The pool request for one viewer input. */
export function toDispatchInput(projectId: string, browserId: string, input: ViewerInput): DispatchInputRequest {
  const base = { projectId, browserId };
  switch (input.t) {
    case 'mouse':
      return { ...base, mouse: { type: MOUSE_TYPES[input.type], x: input.x, y: input.y, button: BUTTONS[input.button], clickCount: input.clicks, modifiers: input.mods } };
    case 'wheel':
      return { ...base, wheel: { x: input.x, y: input.y, deltaX: input.dx, deltaY: input.dy } };
    case 'key':
      return { ...base, key: { type: KEY_TYPES[input.type], key: input.key, code: input.code, text: input.text, modifiers: input.mods } };
    case 'tab':
      return { ...base, tab: tabAction(input.action, input.value) };
  }
}

/** Inputs that only matter as the latest of their kind; dropped first when a viewer sends faster than the browser takes them. */
export function isCoalescable(input: ViewerInput): boolean {
  return (input.t === 'mouse' && input.type === 'move') || input.t === 'wheel';
}
