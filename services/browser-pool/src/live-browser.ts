/**
 * A running browser as the pool holds it: the Chromium process, its tabs, its screencast, the
 * CDP clients attached through the proxy and when it was last used. Launched and prepared ahead
 * of time (warm) or on demand; a record is attached when it is handed out.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { WebSocket } from 'ws';
import type { Logger } from '../../common/src/logger.js';
import type { BrowserRow } from './browser.repository.js';
import { Chromium, type LaunchOptions } from './chromium.js';
import { egressSocketPath, FORWARDER_PORT } from './confinement.js';
import { cosmeticScript, type AdBlocker } from './adblock.js';
import { EgressProxy, type EgressPolicy, type LookupAll } from './egress-proxy.js';
import { acceptLanguage, userAgentOverride, type Identity } from './identity.js';
import { Screencast, type ScreencastOptions } from './screencast.js';
import { Tabs } from './tabs.js';
import type { SupervisorState } from './supervisor.js';

/** How to launch and prepare a browser. */
export interface LiveBrowserOptions extends Omit<LaunchOptions, 'width' | 'height' | 'proxyServer'> {
  /** Launched to pass for a person's browser (Chromium's automation switches off); the rest of the fingerprint comes with `present`. */
  stealth: boolean;
  /** What the browser's network may reach; every request goes through an egress proxy of its own that enforces it. */
  egress: EgressPolicy;
  /** Name resolution of the egress proxy (default: the system's). */
  egressLookup?: LookupAll | undefined;
  /** The operator's proxy (per country) the egress proxy chains to. */
  upstream?: URL | undefined;
  /** Viewport (CSS pixels) the page should get. */
  width: number;
  height: number;
  screencast: ScreencastOptions;
  /** Its session in a browser context of its own (so its Chromium can be reused); else in the default context, as a browser that is never reused. */
  sessionContext?: boolean | undefined;
  now?: () => number;
}

/** What a browser needs again from a new pool process after a restart (kept in its supervisor's state file). */
interface Resumable {
  /** Its egress proxy's port (outside a network namespace; in one, the socket in its folder). */
  egressPort: number | undefined;
  identity: Identity | undefined;
  /** The browser (record) id of its session: its folder's name for the first one, a new id for each it is reused for. */
  sessionId?: string | undefined;
  /** The browser context its session runs in. */
  contextId?: string | undefined;
}

/** The record id of the session a supervisor's browser serves (its state's id until it was reused). */
export function sessionIdOf(state: SupervisorState): string {
  return (state.browser as Resumable | undefined)?.sessionId ?? state.id;
}

/**
 * Window frame of headless Chromium (tab strip and toolbar) around the viewport. Learned from the
 * first browser and used to size the windows of the next ones, so their viewport is exact.
 */
let frameInsets: { dw: number; dh: number } | undefined;

/**
 * Launch switches of a stealth browser: `navigator.webdriver` is false through Chromium's own
 * switch (a patched getter would be visible to a page script).
 */
const STEALTH_ARGS = ['--disable-blink-features=AutomationControlled'];

/**
 * A launched, prepared browser, warm or handed out. Each session runs in a browser context of its
 * own (its cookies, storage, cache and tabs), which CDP clients see as the default context
 * (cdp-proxy.ts), so a Chromium can serve a project's next session once the context is disposed
 * (`reuse`). `id` is the session's browser id; `chromium.id` names the process and its folder.
 */
export class LiveBrowser {
  readonly id: string;
  readonly chromium: Chromium;
  /** The browser's only way out to the network. */
  readonly egress: EgressProxy;
  readonly tabs: Tabs;
  readonly screencast: Screencast;
  readonly width: number;
  readonly height: number;
  readonly proxyCountryCode: string | null;
  readonly stealth: boolean;
  /** What it presents to pages, once handed out (`present`). */
  identity: Identity | undefined;
  /** The record, once handed out. */
  row: BrowserRow | undefined;
  /** The browser context its session's pages are in (the default one of a browser taken over from before contexts). */
  contextId: string | undefined;
  lastActivity: number;
  readonly #clients = new Set<WebSocket>();
  /** Downloads named by GUID (Playwright's `allowAndName`) → the name the site suggested. */
  readonly #downloadNames = new Map<string, string>();
  readonly #logger: Logger;
  readonly #now: () => number;
  #queue: Promise<unknown> = Promise.resolve();
  #downloadsInProgress = 0;
  #stopping: Promise<void> | undefined;
  /** Its listeners on the connection, which outlives it when the Chromium is reused. */
  readonly #offs: (() => void)[] = [];
  readonly #sessionContext: boolean;
  #endedResolve!: () => void;
  /** Resolves as soon as the browser starts stopping (viewers' streams end then). */
  readonly ending: Promise<void> = new Promise((r) => (this.#endedResolve = r));

  private constructor(chromium: Chromium, egress: EgressProxy, o: LiveBrowserOptions, proxyCountryCode: string | null) {
    this.id = o.id;
    this.#sessionContext = !!o.sessionContext;
    this.chromium = chromium;
    this.egress = egress;
    this.width = o.width;
    this.height = o.height;
    this.proxyCountryCode = proxyCountryCode;
    this.stealth = o.stealth;
    this.#logger = o.logger.child({ browserId: chromium.id });
    this.#now = o.now ?? Date.now;
    this.lastActivity = this.#now();
    this.tabs = new Tabs(chromium.conn);
    this.screencast = new Screencast(chromium.conn, this.tabs, o.screencast, this.#logger);
    this.#offs.push(
      chromium.conn.on('Browser.downloadWillBegin', (p: { guid: string; suggestedFilename: string }) => {
        this.#downloadsInProgress++;
        if (p.guid && p.suggestedFilename) this.#downloadNames.set(p.guid, p.suggestedFilename);
      }),
      chromium.conn.on('Browser.downloadProgress', (p: { state: string }) => {
        if (p.state !== 'inProgress') this.#downloadsInProgress = Math.max(0, this.#downloadsInProgress - 1);
      }),
    );
  }

  /** Launches Chromium and prepares it: tabs tracked, downloads to its folder, viewport exact. */
  static async launch(o: LiveBrowserOptions, proxyCountryCode: string | null = null): Promise<LiveBrowser> {
    const insets = frameInsets ?? { dw: 0, dh: 0 };
    // In a network namespace the browser reaches its egress proxy through a socket in its own folder.
    const socketPath = o.confinement.netNamespace ? egressSocketPath(o.rootDir, o.id) : undefined;
    if (socketPath) fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
    const egress = await EgressProxy.start({ policy: o.egress, logger: o.logger.child({ browserId: o.id }), upstream: o.upstream, socketPath, ...(o.egressLookup ? { lookup: o.egressLookup } : {}) }).catch((err) => {
      if (socketPath) fs.rmSync(path.dirname(socketPath), { recursive: true, force: true });
      throw err;
    });
    let chromium: Chromium;
    try {
      chromium = await Chromium.launch({
        ...o,
        proxyServer: `http://127.0.0.1:${socketPath ? FORWARDER_PORT : egress.port}`,
        width: o.width + insets.dw,
        height: o.height + insets.dh,
        // The screen is the window's size: a maximized window, larger than the viewport by the browser's frame.
        extraArgs: [`--screen-info={0,0 ${o.width + insets.dw}x${o.height + insets.dh}}`, ...(o.stealth ? STEALTH_ARGS : []), ...(o.extraArgs ?? [])],
      });
    } catch (err) {
      await egress.stop();
      // A launch refused before Chromium made its folder its own (its own cleanup covers the rest).
      if (socketPath) fs.rmSync(path.dirname(socketPath), { recursive: true, force: true });
      throw err;
    }
    const b = new LiveBrowser(chromium, egress, o, proxyCountryCode);
    try {
      b.#save();
      await b.#prepare();
      if (o.signal?.aborted) throw new Error('launch aborted');
      return b;
    } catch (err) {
      await b.shutdown();
      await chromium.removed;
      throw err;
    }
  }

  /**
   * Takes over a browser a previous pool process launched and handed out (its supervisor kept it
   * running): its egress proxy listens again where Chromium reaches it, and the pool's own CDP
   * setup is made again over the new connection (tab tracking, download folder; `present` redoes
   * the identity). The previous process's page sessions are detached: Chromium announces every
   * target and attaches to every page anew.
   */
  static async adopt(o: LiveBrowserOptions, state: SupervisorState, row: BrowserRow): Promise<LiveBrowser> {
    const saved = state.browser as Resumable | undefined;
    if (!saved) throw new Error('no state of a handed-out browser');
    const socketPath = o.confinement.netNamespace ? egressSocketPath(o.rootDir, state.id) : undefined;
    if (socketPath) fs.rmSync(socketPath, { force: true });
    else if (!saved.egressPort) throw new Error('no egress port recorded');
    const upstream = o.upstream;
    const egress = await EgressProxy.start({ policy: o.egress, logger: o.logger.child({ browserId: o.id }), upstream, socketPath, port: saved.egressPort, ...(o.egressLookup ? { lookup: o.egressLookup } : {}) });
    let chromium: Chromium;
    try {
      chromium = await Chromium.adopt({ rootDir: o.rootDir, state, logger: o.logger });
    } catch (err) {
      await egress.stop();
      throw err;
    }
    const b = new LiveBrowser(chromium, egress, o, row.proxyCountryCode);
    b.row = row;
    b.identity = saved.identity;
    b.contextId = saved.contextId;
    try {
      const conn = chromium.conn;
      // Off, then on again (tabs.start and present): Chromium announces what exists only when they turn on.
      await conn.send('Target.setDiscoverTargets', { discover: false });
      await conn.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false, flatten: true });
      await Promise.all([b.tabs.start(), b.#allowDownloads()]);
      return b;
    } catch (err) {
      chromium.detach();
      await egress.stop();
      throw err;
    }
  }

  /**
   * The same Chromium, prepared for a next session of the same project: `old`'s session ends (its
   * clients cut, its viewers' streams ended, its listeners gone) and a new browser context is
   * opened; then every other context is disposed (the previous session's pages, cookies, storage,
   * cache and permissions with it) and its downloads folder emptied. `o.id` is the new session's
   * browser id. `old` must be done with (its downloads stored, its profile saved). When this
   * fails, the Chromium is ended.
   */
  static async reuse(old: LiveBrowser, o: LiveBrowserOptions): Promise<LiveBrowser> {
    if (!old.chromium.alive || old.#stopping) throw new Error('the browser is not running');
    old.#stopping = Promise.resolve();
    old.#release();
    const conn = old.chromium.conn;
    try {
      // Off before the new session tracks tabs: it hears of the new context's pages only (and present attaches to them anew).
      await conn.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false, flatten: true });
      await conn.send('Target.setDiscoverTargets', { discover: false });
    } catch (err) {
      await old.chromium.stop();
      await old.egress.stop();
      throw err;
    }
    const b = new LiveBrowser(old.chromium, old.egress, o, old.proxyCountryCode);
    try {
      b.egress.setAllowedDomains(undefined);
      b.egress.setBlocker(undefined);
      await b.#prepare();
      for (const f of await fs.promises.readdir(b.chromium.downloadsDir)) await fs.promises.rm(path.join(b.chromium.downloadsDir, f), { recursive: true, force: true });
      return b;
    } catch (err) {
      await b.shutdown();
      throw err;
    }
  }

  /** Downloads of its session's context go to its folder, announced to the pool. */
  #allowDownloads(): Promise<unknown> {
    return this.chromium.conn.send('Browser.setDownloadBehavior', {
      behavior: 'allow',
      downloadPath: this.chromium.downloadsDir,
      eventsEnabled: true,
      ...(this.contextId ? { browserContextId: this.contextId } : {}),
    });
  }

  /** Writes what a next pool process needs to take this browser over. */
  #save(): void {
    const r: Resumable = { egressPort: this.egress.port || undefined, identity: this.identity, sessionId: this.id, contextId: this.contextId };
    this.chromium.saveState(r as unknown as Record<string, unknown>);
  }

  /**
   * Leaves the browser running for the next pool process of this data dir (a restart): clients
   * and viewers are cut, the egress proxy stops listening (the next process listens again at the
   * same place), the supervisor keeps Chromium. Idempotent.
   */
  detach(): Promise<void> {
    return this.#close(false);
  }

  /** A new browser context with one blank tab, every other page closed and every other context disposed; tabs tracked, downloads to its folder. Resolves to the tab. */
  async #openContext(): Promise<string> {
    const conn = this.chromium.conn;
    const { browserContextIds } = await conn.send<{ browserContextIds: string[] }>('Target.getBrowserContexts');
    const { browserContextId } = await conn.send<{ browserContextId: string }>('Target.createBrowserContext', {});
    this.contextId = browserContextId;
    // Its tab first: a browser with no tab left would end.
    const { targetId } = await conn.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank', browserContextId });
    const { targetInfos } = await conn.send<{ targetInfos: { targetId: string; type: string; browserContextId?: string }[] }>('Target.getTargets');
    await Promise.all([
      ...targetInfos.filter((t) => t.type === 'page' && t.browserContextId !== browserContextId).map((t) => conn.send('Target.closeTarget', { targetId: t.targetId }).catch(() => {})),
      ...browserContextIds.map((id) => conn.send('Target.disposeBrowserContext', { browserContextId: id })),
    ]);
    await Promise.all([this.tabs.start(), this.#allowDownloads()]);
    return targetId;
  }

  /**
   * Opens the session — with `sessionContext`, in a new browser context (see #openContext; Chromium's
   * first tab and a previous session's are closed), else in Chromium's first tab — then makes the
   * viewport exact.
   */
  async #prepare(): Promise<void> {
    const conn = this.chromium.conn;
    const first = this.#sessionContext ? await this.#openContext() : await Promise.all([this.tabs.start(), this.#allowDownloads()]).then(() => this.tabs.activeId);
    this.#save();
    if (!first) return;
    const sessionId = await this.tabs.session(first);
    const r = await conn.send<{ result: { value: number[] } }>(
      'Runtime.evaluate',
      { expression: '[innerWidth, innerHeight, outerWidth - innerWidth, outerHeight - innerHeight]', returnByValue: true },
      sessionId,
    );
    const [w, h, dw, dh] = r.result.value as [number, number, number, number];
    if (dw >= 0 && dh >= 0 && dw < 400 && dh < 400) frameInsets = { dw, dh };
    if (w !== this.width || h !== this.height) {
      const { windowId } = await conn.send<{ windowId: number }>('Browser.getWindowForTarget', { targetId: first });
      await conn.send('Browser.setWindowBounds', { windowId, bounds: { width: this.width + dw, height: this.height + dh } });
    }
  }

  /**
   * Presents `identity` to every page of the browser, the open ones and every one opened later (by
   * a page, the agent or a CDP client): the pool auto-attaches to each new page while it waits to
   * start, sets the overrides, then lets it run, so no script of the page runs before they hold.
   * Dedicated workers take the page's UA; the CPU count and languages of workers stay Chromium's.
   * With `blocker` (block_ads), each frame's document also gets the lists' hiding rules (see #hide).
   */
  async present(identity: Identity, blocker?: AdBlocker): Promise<void> {
    this.identity = identity;
    this.#save();
    const conn = this.chromium.conn;
    const version = await conn.send<{ product: string; userAgent: string }>('Browser.getVersion');
    const ua = identity.hardware ? userAgentOverride(version, identity) : { userAgent: version.userAgent, acceptLanguage: acceptLanguage(identity.locale) };
    const pending = new Set<Promise<unknown>>();
    const emulate = (sessionId: string) => {
      // Marked before its events can come: a page resumed at once may reach DOMContentLoaded before Page.enable answers.
      if (blocker) hiding.add(sessionId);
      return Promise.all([
        conn.send('Emulation.setUserAgentOverride', ua, sessionId),
        conn.send('Emulation.setLocaleOverride', { locale: identity.locale }, sessionId),
        conn.send('Emulation.setTimezoneOverride', { timezoneId: identity.timezone }, sessionId),
        identity.hardware ? conn.send('Emulation.setHardwareConcurrencyOverride', { hardwareConcurrency: identity.hardware.hardwareConcurrency }, sessionId) : undefined,
        blocker ? conn.send('Page.enable', {}, sessionId) : undefined,
        blocker ? conn.send('Page.setLifecycleEventsEnabled', { enabled: true }, sessionId) : undefined,
      ]);
    };
    const hiding = new Set<string>();
    if (blocker) {
      this.#offs.push(
        conn.on('Page.lifecycleEvent', (p: { frameId: string; name: string }, sessionId: string | undefined) => {
          if (p.name !== 'DOMContentLoaded' || sessionId === undefined || !hiding.has(sessionId)) return;
          this.#hide(blocker, sessionId, p.frameId).catch((err) => this.#logger.debug({ err }, 'hiding rules not applied to a frame (gone meanwhile)'));
        }),
        conn.on('Target.detachedFromTarget', (p: { sessionId: string }) => void hiding.delete(p.sessionId)),
      );
    }
    const off = conn.on('Target.attachedToTarget', (p: { sessionId: string; targetInfo: { type: string }; waitingForDebugger: boolean }, parent: string | undefined) => {
      if (parent !== undefined) return;
      // The overrides are sent, then the target is let run without waiting for their answers: a
      // session's commands are applied in order, so they hold before its first script. A tab a
      // page opens (a link with a target, window.open) answers them only once it runs: awaiting the
      // answers first stalled every such tab for the connection's 30 s timeout.
      const applied = p.targetInfo.type === 'page' ? emulate(p.sessionId) : Promise.resolve();
      const resumed = p.waitingForDebugger ? conn.send('Runtime.runIfWaitingForDebugger', {}, p.sessionId).catch(() => {}) : undefined;
      const done = Promise.all([applied.catch((err) => this.#logger.debug({ err }, 'identity not applied to a target (closed meanwhile)')), resumed]);
      pending.add(done);
      void done.finally(() => pending.delete(done));
    });
    this.#offs.push(off);
    // The open pages are attached (and announced) before this answers; their overrides are awaited.
    await conn.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: true });
    await Promise.all(pending);
  }

  /**
   * Cosmetic filtering of one loaded document: in an isolated world of the frame (no page script
   * sees it run), reads the document's URL, classes, ids and links; then adds one stylesheet of the
   * lists' rules for its host, their generic ones and those matching what it has. Hidden elements
   * are `display: none`, which the agent's observation leaves out. Elements a script adds later
   * are hidden only by host and generic rules.
   */
  async #hide(blocker: AdBlocker, sessionId: string, frameId: string): Promise<void> {
    const conn = this.chromium.conn;
    const { executionContextId: contextId } = await conn.send<{ executionContextId: number }>('Page.createIsolatedWorld', { frameId, worldName: 'ats-hiding', grantUniveralAccess: false }, sessionId);
    const read = await conn.send<{ result: { value?: string } }>('Runtime.evaluate', { expression: `JSON.stringify({ url: location.href, dom: JSON.parse(${cosmeticScript('', true)}) })`, contextId, returnByValue: true }, sessionId);
    const { url, dom } = JSON.parse(read.result.value ?? '{}') as { url?: string; dom?: { classes: string[]; ids: string[]; hrefs: string[] } };
    if (!url || !dom) return;
    const css = [blocker.hostStyles(url), blocker.domStyles(url, dom)].filter(Boolean).join('\n');
    if (css) await conn.send('Runtime.evaluate', { expression: cosmeticScript(css, false), contextId }, sessionId);
  }

  get alive(): boolean {
    return this.chromium.alive && !this.#stopping;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** True while a CDP client, a viewer or a run holds the browser: it is not idle then (a recorder does not count). */
  get inUse(): boolean {
    return this.#clients.size > 0 || this.screencast.watcherCount > 0 || !!this.row?.runId;
  }

  get clientCount(): number {
    return this.#clients.size;
  }

  get downloadsInProgress(): number {
    return this.#downloadsInProgress;
  }

  touch(): void {
    this.lastActivity = this.#now();
  }

  /** The name to list a downloaded file under: the suggested one when Chromium named it by GUID. */
  downloadName(fileName: string): string {
    return this.#downloadNames.get(fileName) ?? fileName;
  }

  /** Tracks a CDP client's connection: it counts as use and is cut when the browser stops. */
  addClient(client: WebSocket): void {
    this.#clients.add(client);
    this.touch();
    client.once('close', () => {
      this.#clients.delete(client);
      this.touch();
    });
  }

  /** Runs `fn` after every operation queued before it (saves, releases, stop never interleave). */
  serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Cuts the clients, ends the screencast and kills the process group (its directories go in the background). Idempotent. */
  shutdown(): Promise<void> {
    return this.#close(true);
  }

  /** Its session is over: clients and viewers cut, its listeners gone (the Chromium is left as it is). */
  #release(): void {
    this.#endedResolve();
    for (const c of this.#clients) c.terminate();
    this.#clients.clear();
    this.screencast.stop();
    this.tabs.stop();
    for (const off of this.#offs.splice(0)) off();
  }

  /** What shutdown and detach share: the session released, then Chromium stopped (`kill`) or left to its supervisor. */
  #close(kill: boolean): Promise<void> {
    this.#stopping ??= (async () => {
      this.#release();
      if (kill) await this.chromium.stop();
      else this.chromium.detach();
      await this.egress.stop();
    })();
    return this.#stopping;
  }
}
