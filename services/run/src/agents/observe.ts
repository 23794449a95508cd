/**
 * The page as the model reads it: one serialization in DOM order of text and interactive
 * elements (`[index] role "name" state`), through shadow roots (open ones, and closed ones found
 * at the CDP level) and every frame (same- and cross-origin), centred on the viewport and held to
 * a hard character budget. Also: finding an indexed element again in its frame, and settling
 * after an action.
 */
import type { Browser, CDPSession, ElementHandle, Frame, JSHandle, Page } from 'puppeteer-core';
import { closedShadowCandidates, domQuiet, markWithoutClosed, queryInClosed, snapshotFrame, type FrameElement, type FrameSnapshot } from './observe.page.js';

export type PageElement = FrameElement;

export interface Observation {
  url: string;
  title: string;
  /** Every indexed element of the page (all frames), whether shown or not. */
  elements: PageElement[];
  /** The serialization the model reads (viewport-centred, within the budget). */
  text: string;
  tabs: { tab: number; url: string; title: string; active: boolean }[];
  /** A JPEG of the viewport, taken only when a model asks for it (image-capable models). */
  screenshot?: () => Promise<Uint8Array | undefined>;
}

export interface ObserveOptions {
  /** Characters of page serialization at most (markers included). */
  budget?: number;
  /** Screens shown above and below the viewport. */
  screens?: number;
}

/** Default character budget of the page serialization: leaves room in a 60,000-character prompt. */
export const OBSERVATION_BUDGET = 24000;

interface TabState {
  next: number;
  /** Which frame each index was last seen in. */
  frames: Map<number, Frame>;
}
const tabs = new WeakMap<Page, TabState>();
const tabState = (page: Page): TabState => {
  let s = tabs.get(page);
  if (!s) tabs.set(page, (s = { next: 1, frames: new Map() }));
  return s;
};

/** Runs a self-contained function in a frame from its source text (tsx's `__name` helper shimmed). */
export function inFrame<A, R>(frame: Page | Frame, fn: (a: A) => R, arg: A): Promise<Awaited<R>> {
  return frame.evaluate(`(() => { const __name = (f) => f; return (${fn.toString()})(${JSON.stringify(arg)}); })()`) as Promise<Awaited<R>>;
}

/** The same with page objects as further arguments (closed shadow roots); the result stays in the page when `asHandle`. */
function inFrameWith<A, H, R>(frame: Frame, fn: (a: A, ...h: H[]) => R, arg: A, handles: JSHandle[], asHandle: true): Promise<JSHandle<R>>;
function inFrameWith<A, H, R>(frame: Frame, fn: (a: A, ...h: H[]) => R, arg: A, handles: JSHandle[], asHandle?: false): Promise<Awaited<R>>;
function inFrameWith<A, H, R>(frame: Frame, fn: (a: A, ...h: H[]) => R, arg: A, handles: JSHandle[], asHandle = false): Promise<unknown> {
  // Built from source like inFrame; its types are the page function's, checked at the call sites.
  const call = new Function('arg', '...handles', `const __name = (f) => f; return (${fn.toString()})(arg, ...handles);`) as (...a: unknown[]) => R;
  return asHandle ? frame.evaluateHandle(call, arg, ...handles) : frame.evaluate(call, arg, ...handles);
}

/**
 * puppeteer's CDP session and main world of a frame. Not public API, but the only way to hand a
 * node found at the CDP level to a page function: no page script reaches into a closed shadow
 * root, and patching attachShadow in the page would show (pages look for such changes).
 */
interface FrameInternals {
  client: CDPSession;
  mainRealm(): { adoptBackendNode(backendNodeId: number): Promise<JSHandle> };
}

/** Custom elements asked about closed shadow roots per frame and observation, at most (one CDP call each; each is asked once). */
const CLOSED_HOSTS_MAX = 64;

interface CdpNode {
  backendNodeId: number;
  shadowRootType?: string;
  children?: CdpNode[];
  shadowRoots?: CdpNode[];
}

/** The closed shadow roots of the frame's document (nested ones too), as handles in its main world; none where puppeteer's internals are not there. */
async function closedRoots(frame: Frame): Promise<JSHandle[]> {
  const f = frame as unknown as Partial<FrameInternals>;
  if (!f.client || typeof f.mainRealm !== 'function') return [];
  const list = await frame.evaluateHandle(`(() => { const __name = (f) => f; return (${closedShadowCandidates.toString()})(${CLOSED_HOSTS_MAX}); })()`);
  const hosts = [...(await list.getProperties()).values()].map((h) => h.asElement()).filter((h): h is ElementHandle<Element> => !!h);
  await list.dispose();
  if (!hosts.length) return [];
  try {
    const found: number[] = [];
    const without: JSHandle[] = [];
    const collect = (n: CdpNode, into: number[]) => {
      for (const r of n.shadowRoots ?? []) {
        if (r.shadowRootType === 'closed') into.push(r.backendNodeId);
        collect(r, into);
      }
      for (const c of n.children ?? []) collect(c, into);
    };
    const describe = async (target: { objectId: string } | { backendNodeId: number }, depth: number) => ((await f.client!.send('DOM.describeNode', { ...target, depth, pierce: true })) as { node: CdpNode }).node;
    await Promise.all(
      hosts.map(async (h) => {
        // The host alone (its own light DOM may be the whole page), then each closed root whole, for roots nested in it.
        const roots = ((await describe({ objectId: h.remoteObject().objectId! }, 0)).shadowRoots ?? []).filter((r) => r.shadowRootType === 'closed');
        if (!roots.length) return void without.push(h);
        for (const r of roots) {
          found.push(r.backendNodeId);
          collect(await describe({ backendNodeId: r.backendNodeId }, -1), found);
        }
      }),
    );
    if (without.length) await inFrameWith(frame, markWithoutClosed, null, without);
    return await Promise.all(found.map((id) => f.mainRealm!().adoptBackendNode(id)));
  } finally {
    await Promise.all(hosts.map((h) => h.dispose().catch(() => undefined)));
  }
}

const pages = (n: number) => (Math.round(n * 10) / 10).toLocaleString('en-US');

/** Where the frame is scrolled, in pages above and below. */
function scrollHeader(s: FrameSnapshot): string {
  const vh = s.viewportHeight || 800;
  const pagesAbove = s.scrollY / vh;
  const pagesBelow = Math.max(0, (s.scrollHeight - s.scrollY - vh) / vh);
  return s.scrollHeight > vh + 2 ? `(scrolled to ${Math.round(s.scrollY)} of ${Math.round(s.scrollHeight)} px; ${pages(pagesAbove)} pages above, ${pages(pagesBelow)} pages below)` : '';
}

const size = (lines: string[]) => lines.reduce((a, l) => a + l.length + 1, 0);

/** Cuts `lines` to `budget` characters (cut markers included), keeping those nearest the viewport. */
function withinBudget(lines: string[], ys: number[], centre: number, budget: number): string[] {
  if (size(lines) <= budget) return lines;
  let room = budget;
  for (let i = 0; i < 8; i++) {
    const kept = cutTo(lines, ys, centre, room);
    const over = size(kept) - budget;
    if (over <= 0) return kept;
    room -= over;
  }
  return cutTo(lines, ys, centre, Math.floor(budget / 2));
}

function cutTo(lines: string[], ys: number[], centre: number, budget: number): string[] {
  const order = lines.map((_, i) => i).sort((a, b) => Math.abs(ys[a]! - centre) - Math.abs(ys[b]! - centre));
  const keep = new Set<number>();
  let used = 0;
  for (const i of order) {
    if (used + lines[i]!.length + 1 > budget) continue;
    keep.add(i);
    used += lines[i]!.length + 1;
  }
  const kept: string[] = [];
  let gap = 0;
  for (let i = 0; i < lines.length; i++) {
    if (keep.has(i)) {
      if (gap) kept.push(`… (${gap} lines cut to fit the budget; scroll to bring them nearer)`);
      gap = 0;
      kept.push(lines[i]!);
    } else gap++;
  }
  if (gap) kept.push(`… (${gap} lines cut to fit the budget; scroll to bring them nearer)`);
  return kept;
}

async function frameId(frame: Frame): Promise<string | undefined> {
  const el = await frame.frameElement().catch(() => null);
  if (!el) return undefined;
  try {
    return await el.evaluate((e) => (e as HTMLElement).dataset.atsFrame);
  } finally {
    await el.dispose().catch(() => undefined);
  }
}

/** Serializes `frame` and, in place of its iframes, their frames (recursively). */
async function serializeFrame(frame: Frame, state: TabState, elements: PageElement[], budget: number, screens: number, depth: number): Promise<string[]> {
  let snap: FrameSnapshot;
  try {
    const closed = await closedRoots(frame);
    try {
      snap = closed.length ? await inFrameWith(frame, snapshotFrame, { next: state.next, screens }, closed) : await inFrame(frame, snapshotFrame, { next: state.next, screens });
    } finally {
      await Promise.all(closed.map((r) => r.dispose().catch(() => undefined)));
    }
  } catch (err) {
    // The top document is the page: its caller retries once it has settled.
    if (depth === 0) throw err;
    return [`(this frame could not be read: ${(err as Error).message.split('\n')[0]})`];
  }
  state.next = snap.next;
  for (const e of snap.elements) {
    state.frames.set(e.index, frame);
    elements.push(e);
  }
  const children = new Map<string, Frame>();
  if (depth < 5) {
    for (const child of frame.childFrames()) {
      const id = await frameId(child);
      if (id) children.set(id, child);
    }
  }
  const w = { ...snap, header: scrollHeader(snap) };
  const out: string[] = [];
  const ys: number[] = [];
  if (w.above) {
    out.push(`… (${w.above} lines above, scroll up to see them)`);
    ys.push(-Infinity);
  }
  for (const l of w.lines) {
    if (l.frame !== undefined) {
      const child = children.get(l.frame);
      if (!child) continue;
      const inner = await serializeFrame(child, state, elements, Math.floor(budget / 2), screens, depth + 1);
      out.push(`--- iframe ${child.url()} ---`, ...inner, '--- end of iframe ---');
      for (let i = 0; i < inner.length + 2; i++) ys.push(l.y);
    } else {
      out.push(l.text!);
      ys.push(l.y);
    }
  }
  if (w.below) {
    out.push(`… (${w.below} lines below, scroll down to see them)`);
    ys.push(Infinity);
  }
  const centre = snap.scrollY + snap.viewportHeight / 2;
  const kept = withinBudget(out, ys, centre, budget - w.header.length - 1);
  return w.header ? [w.header, ...kept] : kept;
}

/** Observes the tab `page` of `browser`. */
export async function observePage(browser: Browser, page: Page, opts: ObserveOptions = {}): Promise<Observation> {
  const state = tabState(page);
  state.frames.clear();
  let elements: PageElement[] = [];
  let lines: string[] = [];
  for (let attempt = 1; ; attempt++) {
    elements = [];
    try {
      lines = await serializeFrame(page.mainFrame(), state, elements, opts.budget ?? OBSERVATION_BUDGET, opts.screens ?? 1, 0);
      break;
    } catch (err) {
      // A redirect or a script navigating replaced the document while it was read: read the next one.
      if (attempt >= 3 || page.isClosed()) throw err;
      await settlePage(page, 3000);
    }
  }
  const open = (await browser.pages()).filter((p) => !p.isClosed());
  const tabList = await Promise.all(open.map(async (p, tab) => ({ tab, url: p.url(), title: await p.title().catch(() => ''), active: p === page })));
  return {
    url: page.url(),
    title: await page.title().catch(() => ''),
    elements,
    text: lines.join('\n') || '(the page is empty)',
    tabs: tabList,
    screenshot: async () => page.screenshot({ type: 'jpeg', quality: 60 }).catch(() => undefined),
  };
}

/** The element `[index]` of the last observation of `page`, in whichever frame it lives. */
export async function findIndexed(page: Page, index: number): Promise<ElementHandle<Element> | null> {
  const known = tabState(page).frames.get(index);
  const frames = known && !known.detached ? [known, ...page.frames().filter((f) => f !== known)] : page.frames();
  const selector = `[data-ats-idx="${index}"]`;
  for (const f of frames) {
    const h = await f.$(`pierce/${selector}`).catch(() => null);
    if (h) return h;
  }
  // In a closed shadow root no selector reaches it: look inside the roots found at the CDP level.
  for (const f of frames) {
    const roots = await closedRoots(f).catch(() => []);
    if (!roots.length) continue;
    try {
      const h = (await inFrameWith(f, queryInClosed, selector, roots, true)).asElement();
      if (h) return h as ElementHandle<Element>;
    } finally {
      await Promise.all(roots.map((r) => r.dispose().catch(() => undefined)));
    }
  }
  return null;
}

/** Waits, each bounded, for the network to idle and the DOM to stay quiet briefly. */
export async function settlePage(page: Page, timeoutMs: number): Promise<void> {
  await Promise.all([
    page.waitForNetworkIdle({ idleTime: 150, timeout: timeoutMs }).catch(() => undefined),
    inFrame(page.mainFrame(), domQuiet, { quietMs: 120, maxMs: Math.min(2000, timeoutMs) }).catch(() => undefined),
  ]);
}
