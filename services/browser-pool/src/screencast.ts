/**
 * One CDP screencast per browser, whatever the number of viewers: it runs on the active tab
 * while anyone subscribes, follows the active tab when it changes, acks every frame at once
 * (Chromium sends the next frame only after the ack) and fans each frame out to every
 * subscriber. A new subscriber gets the latest frame straight away, so a still page is not blank.
 */
import type { Logger } from '../../common/src/logger.js';
import type { CdpConnection } from './cdp-connection.js';
import type { TabInfo, Tabs } from './tabs.js';

/** One message for viewers: an image and the tab metadata. */
export interface Frame {
  /** JPEG bytes; empty when only the tab metadata changed. */
  jpeg: Buffer;
  /** Frame time in ms since the Unix epoch (CDP metadata.timestamp × 1000). */
  timestampMs: number;
  width: number;
  height: number;
  url: string;
  title: string;
  tabs: (TabInfo & { active: boolean })[];
}

export interface ScreencastOptions {
  quality: number;
  everyNthFrame: number;
  maxWidth: number;
  maxHeight: number;
}

type Subscriber = (frame: Frame) => void;

interface ScreencastFrameEvent {
  data: string;
  sessionId: number;
  metadata: { timestamp?: number; deviceWidth: number; deviceHeight: number };
}

/** The one screencast of a browser, shared by all its viewers. */
export class Screencast {
  readonly #conn: CdpConnection;
  readonly #tabs: Tabs;
  readonly #opts: ScreencastOptions;
  readonly #logger: Logger;
  readonly #subscribers = new Set<Subscriber>();
  readonly #passive = new Set<Subscriber>();
  /** The tab and session the screencast currently runs on. */
  #current: { targetId: string; sessionId: string } | undefined;
  #switching: Promise<void> = Promise.resolve();
  #last: Frame | undefined;
  #lastMeta = '';
  #stopped = false;
  /** The browser's recorded stop: nothing stamped later is passed on. */
  #endAtMs = Infinity;
  #titlePoll: NodeJS.Timeout | undefined;
  readonly #offs: (() => void)[] = [];

  constructor(conn: CdpConnection, tabs: Tabs, opts: ScreencastOptions, logger: Logger) {
    this.#conn = conn;
    this.#tabs = tabs;
    this.#opts = opts;
    this.#logger = logger;
    const onLoad = (_p: unknown, sessionId: string | undefined) => {
      if (sessionId && sessionId === this.#current?.sessionId) void tabs.refresh();
    };
    this.#offs.push(
      conn.on('Page.screencastFrame', (p: ScreencastFrameEvent, sessionId) => this.#onFrame(p, sessionId)),
      conn.on('Page.domContentEventFired', onLoad),
      conn.on('Page.loadEventFired', onLoad),
      tabs.onChange(() => this.#onTabsChanged()),
    );
  }

  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** Subscribers that count as use of the browser: every one but the passive (a recorder). */
  get watcherCount(): number {
    return this.#subscribers.size - this.#passive.size;
  }

  /** Adds a viewer; returns the function that removes it. A passive one does not count as a watcher. */
  subscribe(fn: Subscriber, opts: { passive?: boolean } = {}): () => void {
    if (this.#stopped) return () => {};
    this.#subscribers.add(fn);
    if (opts.passive) this.#passive.add(fn);
    if (this.#last) fn(this.#last);
    else fn(this.#meta(Buffer.alloc(0), Date.now(), 0, 0));
    this.#follow();
    return () => {
      if (!this.#subscribers.delete(fn)) return;
      this.#passive.delete(fn);
      this.#follow();
    };
  }

  #meta(jpeg: Buffer, timestampMs: number, width: number, height: number): Frame {
    const active = this.#tabs.active;
    return {
      jpeg,
      timestampMs,
      width,
      height,
      url: active?.url ?? '',
      title: active?.title ?? '',
      tabs: this.#tabs.list().map((t) => ({ ...t, active: t.id === active?.id })),
    };
  }

  #emit(frame: Frame): void {
    for (const s of [...this.#subscribers]) {
      try {
        s(frame);
      } catch (err) {
        this.#logger.warn({ err }, 'frame subscriber failed');
      }
    }
  }

  #onFrame(p: ScreencastFrameEvent, sessionId: string | undefined): void {
    if (!sessionId) return;
    // Ack at once, even a frame of a tab we just left: Chromium waits for it before the next one.
    this.#conn.send('Page.screencastFrameAck', { sessionId: p.sessionId }, sessionId).catch(() => {});
    if (this.#current?.sessionId !== sessionId) return;
    // Chromium stamps a frame with its compositor's frame time, which can be a few ms ahead of the
    // moment it reaches us: never later than now, so a frame that came before a stop is never stamped after it.
    const received = Date.now();
    const ts = p.metadata.timestamp !== undefined ? Math.min(p.metadata.timestamp * 1000, received) : received;
    if (ts > this.#endAtMs) return;
    const frame = this.#meta(Buffer.from(p.data, 'base64'), ts, Math.round(p.metadata.deviceWidth), Math.round(p.metadata.deviceHeight));
    this.#last = frame;
    this.#lastMeta = JSON.stringify([frame.url, frame.title, frame.tabs]);
    this.#emit(frame);
  }

  #onTabsChanged(): void {
    const meta = this.#meta(Buffer.alloc(0), Date.now(), this.#last?.width ?? 0, this.#last?.height ?? 0);
    const key = JSON.stringify([meta.url, meta.title, meta.tabs]);
    if (key !== this.#lastMeta) {
      this.#lastMeta = key;
      if (this.#last) this.#last = { ...this.#last, url: meta.url, title: meta.title, tabs: meta.tabs };
      if (this.#subscribers.size && meta.timestampMs <= this.#endAtMs) this.#emit(meta);
    }
    if (this.#current?.targetId !== this.#tabs.activeId) this.#follow();
  }

  /** Moves the screencast to where it should be: the active tab while anyone watches, else nowhere. */
  #follow(): void {
    this.#switching = this.#switching.then(() => this.#move()).catch((err) => this.#logger.debug({ err }, 'screencast switch failed'));
  }

  async #move(): Promise<void> {
    const watched = !this.#stopped && this.#subscribers.size > 0;
    // Titles a script sets later are not announced either; look now and then while a person watches
    // (a recording shows no titles: an idle recorded browser is not asked each second, ~1 % of a core).
    const personWatches = !this.#stopped && this.watcherCount > 0;
    if (personWatches && !this.#titlePoll) {
      this.#titlePoll = setInterval(() => void this.#tabs.refresh(), 1000);
      this.#titlePoll.unref();
    } else if (!personWatches && this.#titlePoll) {
      clearInterval(this.#titlePoll);
      this.#titlePoll = undefined;
    }
    const want = watched ? this.#tabs.activeId : undefined;
    if (this.#current?.targetId === want) return;
    const old = this.#current;
    this.#current = undefined;
    if (old) await this.#conn.send('Page.stopScreencast', {}, old.sessionId).catch(() => {});
    if (!want) return;
    if (old?.targetId !== want) this.#last = undefined;
    const sessionId = await this.#tabs.session(want);
    this.#current = { targetId: want, sessionId };
    const params: Record<string, unknown> = { format: 'jpeg', quality: this.#opts.quality, everyNthFrame: this.#opts.everyNthFrame };
    if (this.#opts.maxWidth) params.maxWidth = this.#opts.maxWidth;
    if (this.#opts.maxHeight) params.maxHeight = this.#opts.maxHeight;
    try {
      await this.#conn.send('Page.enable', {}, sessionId);
      await this.#conn.send('Page.startScreencast', params, sessionId);
      void this.#tabs.refresh();
    } catch (err) {
      // "Target closed": the tab went away meanwhile; the tab tracker picks the next one.
      if (this.#current?.sessionId === sessionId) this.#current = undefined;
      throw err;
    }
  }

  /** The browser was recorded stopped at `ms`: what it shows later is not its session's and is not passed on. */
  endAt(ms: number): void {
    this.#endAtMs = Math.min(this.#endAtMs, ms);
  }

  /** Tells `fn` the time (a frame with no picture) while the browser lives, nothing once its stop is recorded. */
  clock(fn: Subscriber): void {
    const now = Date.now();
    if (this.#stopped || now > this.#endAtMs) return;
    try {
      fn(this.#meta(Buffer.alloc(0), now, this.#last?.width ?? 0, this.#last?.height ?? 0));
    } catch (err) {
      this.#logger.warn({ err }, 'frame subscriber failed');
    }
  }

  /** Ends every subscription and the screencast. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#subscribers.clear();
    this.#passive.clear();
    for (const off of this.#offs.splice(0)) off();
    if (this.#titlePoll) clearInterval(this.#titlePoll);
    this.#titlePoll = undefined;
    this.#follow();
  }
}
