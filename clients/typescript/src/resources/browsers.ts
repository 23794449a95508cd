/** Standalone browsers: provisioned for you to drive over CDP (puppeteer, Playwright), watched live, recorded. */
import type { CamelKeys } from '../casing.js';
import { toSnake } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type { Browser as BrowserModel, BrowserList, CreateBrowserRequest, CreateLiveViewLinkRequest, Download, DownloadList, ListBrowsersQuery, LiveViewLink, Recording } from '../models.js';
import { PageIterator } from '../pagination.js';
import { requestOptions, seg } from './shared.js';

// `await using` needs Symbol.asyncDispose; a runtime without it gets the registered symbol TypeScript's helpers look for.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for('Symbol.asyncDispose');

/** `browsers.create`: the API's request in camelCase, with `profileId` for `browser_profile_id`. */
export type CreateBrowserOptions = Omit<CamelKeys<CreateBrowserRequest>, 'browserProfileId'> & {
  /** A browser profile to load (and to save when the browser stops). */
  profileId?: CreateBrowserRequest['browser_profile_id'];
} & RequestOptions;

/** `browsers.list`: filters and paging. */
export type ListBrowsersOptions = CamelKeys<ListBrowsersQuery> & RequestOptions;

/** `browsers.liveViewLink`: `mode` (`view` or `interactive`) and the link's lifetime. */
export type LiveViewLinkOptions = CamelKeys<CreateLiveViewLinkRequest> & RequestOptions;

export interface BrowserHandle extends BrowserModel {}
/**
 * A browser (the API's `Browser`) that can stop itself: `await browser.stop()`, or declare it
 * with `await using` and it is stopped when the scope ends.
 */
export class BrowserHandle {
  readonly #browsers: Browsers;

  constructor(browsers: Browsers, data: BrowserModel) {
    Object.assign(this, data);
    this.#browsers = browsers;
  }

  /** Stops the browser (safe to call again) and refreshes this object's fields. */
  async stop(options?: RequestOptions): Promise<this> {
    // Copies the record's fields (own properties); the methods stay this object's.
    return Object.assign(this, await this.#browsers.stop(this.id, options));
  }

  /** A fresh link to the browser's live view. */
  liveViewLink(options: LiveViewLinkOptions): Promise<LiveViewLink> {
    return this.#browsers.liveViewLink(this.id, options);
  }

  /** Stops the browser when an `await using` scope ends. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** The project's standalone browsers. */
export class Browsers {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Starts a browser (ready when this returns): `cdpUrl` for puppeteer/Playwright, `liveViewUrl` to watch it. */
  async create(options: CreateBrowserOptions = {}): Promise<BrowserHandle> {
    const { signal, timeoutMs, maxRetries, profileId, ...request } = options;
    const body = toSnake({ ...request, browserProfileId: profileId }) as CreateBrowserRequest;
    return this.#handle(await this.#core.request<BrowserModel>('POST', '/browsers', { signal, timeoutMs, maxRetries, body }));
  }

  /** The project's browsers across pages (filter by `status`, `sessionId`). */
  list(options: ListBrowsersOptions = {}): PageIterator<BrowserHandle> {
    const { signal, timeoutMs, maxRetries, cursor, ...filters } = options;
    return new PageIterator<BrowserHandle>(async (start) => {
      const page = await this.#core.request<BrowserList>('GET', '/browsers', {
        signal,
        timeoutMs,
        maxRetries,
        idempotent: true,
        query: { ...(toSnake(filters) as ListBrowsersQuery), cursor: start },
      });
      return { items: page.items.map((b) => this.#handle(b)), next: page.nextCursor, hasMore: page.hasMore };
    }, cursor);
  }

  /** One browser (with a fresh `recordingUrl` once it has a recording). */
  async get(browserId: string, options: RequestOptions = {}): Promise<BrowserHandle> {
    return this.#handle(await this.#core.request<BrowserModel>('GET', `/browsers/${seg(browserId)}`, { ...requestOptions(options), idempotent: true }));
  }

  /** Stops a browser (stopping a stopped one is fine); returns it. */
  async stop(browserId: string, options: RequestOptions = {}): Promise<BrowserHandle> {
    return this.#handle(await this.#core.request<BrowserModel>('POST', `/browsers/${seg(browserId)}/stop`, { ...requestOptions(options), idempotent: true }));
  }

  /** A link to the browser's MP4 recording (a ConflictError while it is being finished). */
  recording(browserId: string, options: RequestOptions = {}): Promise<Recording> {
    return this.#core.request<Recording>('GET', `/browsers/${seg(browserId)}/recording`, { ...requestOptions(options), idempotent: true });
  }

  /** A new live view link: `mode: 'view'` (watch only) or `'interactive'`, valid `expiresInSeconds`. */
  liveViewLink(browserId: string, options: LiveViewLinkOptions): Promise<LiveViewLink> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<LiveViewLink>('POST', `/browsers/${seg(browserId)}/live-view-links`, {
      signal,
      timeoutMs,
      maxRetries,
      body: toSnake(request) as CreateLiveViewLinkRequest,
    });
  }

  /** The files the browser downloaded. */
  async downloads(browserId: string, options: RequestOptions = {}): Promise<Download[]> {
    return (await this.#core.request<DownloadList>('GET', `/browsers/${seg(browserId)}/downloads`, { ...requestOptions(options), idempotent: true })).items;
  }

  #handle(data: BrowserModel): BrowserHandle {
    return new BrowserHandle(this, data);
  }
}
