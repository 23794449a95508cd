/**
 * The tabs of one browser as the pool sees them over its own CDP connection: page targets in
 * creation order, which one is active (shown in the screencast, receiving input), page sessions
 * attached on demand, and every web origin a tab or frame has shown (the profile saver reads
 * localStorage of those). A new tab becomes active, as it would on screen; when the active tab
 * closes the newest remaining one takes over.
 */
import type { CdpConnection } from './cdp-connection.js';

/** A tab as viewers see it. */
export interface TabInfo {
  id: string;
  url: string;
  title: string;
}

/** URL marking the pool's own helper tabs, which clients' tab lists never show. */
export const INTERNAL_TAB_URL = 'about:blank#ats-internal';

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
  title: string;
}

/** Tracks a browser's tabs over the pool's CDP connection. */
export class Tabs {
  readonly #conn: CdpConnection;
  readonly #tabs = new Map<string, TabInfo>();
  readonly #internal = new Set<string>();
  readonly #sessions = new Map<string, Promise<string>>();
  readonly #listeners = new Set<() => void>();
  /** Web origins (scheme://host:port) any tab or frame has shown. */
  readonly origins = new Set<string>();
  #active: string | undefined;
  #refreshing: Promise<void> | undefined;
  readonly #offs: (() => void)[] = [];

  constructor(conn: CdpConnection) {
    this.#conn = conn;
    this.#offs.push(
      conn.on('Target.targetCreated', (p: { targetInfo: TargetInfo }) => this.#upsert(p.targetInfo, true)),
      conn.on('Target.targetInfoChanged', (p: { targetInfo: TargetInfo }) => this.#upsert(p.targetInfo, false)),
      conn.on('Target.targetDestroyed', (p: { targetId: string }) => this.#remove(p.targetId)),
      conn.on('Target.detachedFromTarget', (p: { sessionId: string; targetId?: string }) => {
        for (const [id, s] of this.#sessions) {
          void s.then((sid) => sid === p.sessionId && this.#sessions.delete(id), () => {});
        }
      }),
    );
  }

  /** Starts tracking; resolves once the existing targets are known. */
  async start(): Promise<void> {
    await this.#conn.send('Target.setDiscoverTargets', { discover: true });
  }

  #upsert(t: TargetInfo, created: boolean): void {
    this.#noteOrigin(t.url);
    if (t.type !== 'page') return;
    if (created && t.url === INTERNAL_TAB_URL) this.#internal.add(t.targetId);
    if (this.#internal.has(t.targetId)) return;
    const known = this.#tabs.get(t.targetId);
    if (known && known.url === t.url && known.title === t.title) return;
    this.#tabs.set(t.targetId, { id: t.targetId, url: t.url, title: t.title });
    if (!known) this.#active = t.targetId;
    this.#changed();
  }

  #remove(id: string): void {
    this.#internal.delete(id);
    this.#sessions.delete(id);
    if (!this.#tabs.delete(id)) return;
    if (this.#active === id) this.#active = [...this.#tabs.keys()].pop();
    this.#changed();
  }

  #noteOrigin(url: string): void {
    if (!/^https?:\/\//.test(url)) return;
    try {
      this.origins.add(new URL(url).origin);
    } catch {
      /* not a URL */
    }
  }

  #changed(): void {
    for (const l of [...this.#listeners]) l();
  }

  /** Calls `listener` whenever tabs, titles, URLs or the active tab change; returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  list(): TabInfo[] {
    return [...this.#tabs.values()];
  }

  get activeId(): string | undefined {
    return this.#active;
  }

  get active(): TabInfo | undefined {
    return this.#active ? this.#tabs.get(this.#active) : undefined;
  }

  has(id: string): boolean {
    return this.#tabs.has(id);
  }

  /**
   * Re-reads every tab's URL and title. Chromium does not always announce a title set while a
   * page loads, so the screencast asks after loads and now and then while someone watches.
   */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#conn
      .send<{ targetInfos: TargetInfo[] }>('Target.getTargets')
      .then((r) => {
        for (const t of r.targetInfos) if (this.#tabs.has(t.targetId)) this.#upsert(t, false);
      })
      .catch(() => {})
      .finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /** Makes a tab the active one (and brings it to the front in Chromium). */
  async activate(id: string): Promise<void> {
    if (!this.#tabs.has(id)) return;
    if (this.#active !== id) {
      this.#active = id;
      this.#changed();
    }
    await this.#conn.send('Target.activateTarget', { targetId: id }).catch(() => {});
  }

  /** A flattened CDP session on a tab, attached once and reused. */
  session(targetId: string): Promise<string> {
    let s = this.#sessions.get(targetId);
    if (!s) {
      s = this.#conn.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true }).then((r) => r.sessionId);
      s.catch(() => this.#sessions.delete(targetId));
      this.#sessions.set(targetId, s);
    }
    return s;
  }

  stop(): void {
    for (const off of this.#offs.splice(0)) off();
    this.#listeners.clear();
  }
}
