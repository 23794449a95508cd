/**
 * One frame feed per browser, whatever the number of viewers: the first viewer opens the
 * browser's StreamFrames subscription, every later one shares it, and it closes a little after
 * the last one leaves. Each frame is packed once and offered to every viewer; a viewer decides
 * for itself whether it can take it now (see ViewerConnection), so a slow one never holds up
 * the others.
 */
import type { Logger } from '../../common/src/logger.js';
import type { StreamFramesResponse } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { FrameFeed, type FeedEnd } from './frame-feed.js';
import type { FrameSource } from './pool-client.js';
import { framePacket, type BrowserState } from './viewer-protocol.js';

/** What the hub needs from a viewer. */
export interface Viewer {
  /** A frame packet (header + JPEG), shared with the other viewers: do not modify it. */
  frame(packet: Buffer): void;
  /** The active tab or the tab strip changed; `json` is the serialised `state` message. */
  state(json: string): void;
  /** The browser is gone; `json` is the serialised `ended` message. */
  ended(json: string, end: FeedEnd): void;
}

export class TooManyViewersError extends Error {}

export interface ViewerHubOptions {
  source: FrameSource;
  logger: Logger;
  /** The feed stays open this long after its last viewer left, so a page reload is instant. */
  lingerMs: number;
  maxViewersPerBrowser: number;
}

class Channel {
  readonly viewers = new Set<Viewer>();
  readonly feed: FrameFeed;
  lastPacket: Buffer | undefined;
  stateJson: string | undefined;
  linger: NodeJS.Timeout | undefined;
  framesIn = 0;

  constructor(o: ViewerHubOptions, projectId: string, browserId: string, onEnded: (c: Channel, end: FeedEnd) => void) {
    this.feed = new FrameFeed({
      source: o.source,
      projectId,
      browserId,
      purpose: 'viewers',
      logger: o.logger,
      listener: {
        frame: (m) => this.#onFrame(m),
        ended: (end) => onEnded(this, end),
      },
    });
  }

  #onFrame(m: StreamFramesResponse): void {
    const json = JSON.stringify({ t: 'state', url: m.url, title: m.title, tabs: m.tabs.map((t) => ({ id: t.id, url: t.url, title: t.title, active: t.active })) } satisfies { t: 'state' } & BrowserState);
    if (json !== this.stateJson) {
      this.stateJson = json;
      for (const v of this.viewers) v.state(json);
    }
    if (!m.jpeg.length) return;
    this.framesIn++;
    const packet = framePacket(m);
    this.lastPacket = packet;
    for (const v of this.viewers) v.frame(packet);
  }
}

export class ViewerHub {
  readonly #o: ViewerHubOptions;
  readonly #channels = new Map<string, Channel>();
  #stopped = false;

  constructor(options: ViewerHubOptions) {
    this.#o = options;
  }

  /** Open feeds (one per watched browser). */
  get feedCount(): number {
    return this.#channels.size;
  }

  /** Adds a viewer of a browser; it gets the latest state and frame at once. Returns its leave function. */
  join(projectId: string, browserId: string, viewer: Viewer): () => void {
    if (this.#stopped) throw new Error('the viewer hub is stopped');
    const key = `${projectId}/${browserId}`;
    let ch = this.#channels.get(key);
    if (ch && ch.viewers.size >= this.#o.maxViewersPerBrowser) throw new TooManyViewersError(`A browser can have at most ${this.#o.maxViewersPerBrowser} viewers`);
    if (!ch) {
      ch = new Channel(this.#o, projectId, browserId, (c, end) => this.#ended(key, c, end));
      this.#channels.set(key, ch);
      ch.feed.start();
    }
    clearTimeout(ch.linger);
    ch.viewers.add(viewer);
    if (ch.stateJson) viewer.state(ch.stateJson);
    if (ch.lastPacket) viewer.frame(ch.lastPacket);
    const channel = ch;
    return () => {
      if (!channel.viewers.delete(viewer) || channel.viewers.size > 0) return;
      channel.linger = setTimeout(() => this.#close(key, channel), this.#o.lingerMs);
    };
  }

  #ended(key: string, ch: Channel, end: FeedEnd): void {
    if (this.#channels.get(key) === ch) this.#channels.delete(key);
    clearTimeout(ch.linger);
    const json = JSON.stringify({ t: 'ended', reason: end.reason });
    for (const v of [...ch.viewers]) v.ended(json, end);
    ch.viewers.clear();
  }

  #close(key: string, ch: Channel): void {
    if (ch.viewers.size > 0) return;
    if (this.#channels.get(key) === ch) this.#channels.delete(key);
    ch.feed.stop();
  }

  /** Closes every feed. Viewers are closed by their own connections. Idempotent. */
  stop(): void {
    this.#stopped = true;
    for (const [key, ch] of this.#channels) {
      clearTimeout(ch.linger);
      ch.feed.stop();
      this.#channels.delete(key);
    }
  }
}
