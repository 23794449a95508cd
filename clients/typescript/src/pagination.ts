/**
 * Auto-paging: a list call returns a PageIterator that `for await` walks item by item across
 * pages, fetching each page as it is reached; `firstPage()` and `pages()` give the pages.
 * Lists page by `cursor` (`nextCursor`); a run's steps and events by `after` (`nextAfter`).
 */

/** One page of a list as the API answered it. */
export interface PageData<T, C> {
  items: T[];
  /** Where the next page starts (a cursor or an `after`), null when the API gave none. */
  next: C | null;
  hasMore: boolean;
}

/** One page, and the way to the next. */
export class Page<T, C extends string | number = string> implements PageData<T, C> {
  readonly items: T[];
  readonly next: C | null;
  readonly hasMore: boolean;
  readonly #fetchPage: (start: C) => Promise<Page<T, C>>;

  constructor(data: PageData<T, C>, fetchPage: (start: C) => Promise<Page<T, C>>) {
    this.items = data.items;
    this.next = data.next;
    this.hasMore = data.hasMore;
    this.#fetchPage = fetchPage;
  }

  /** Whether another page follows. */
  hasNextPage(): boolean {
    return this.hasMore && this.next !== null;
  }

  /** The next page, or null after the last one. */
  async nextPage(): Promise<Page<T, C> | null> {
    return this.hasNextPage() ? this.#fetchPage(this.next as C) : null;
  }
}

/** Every item of a list, page after page, fetched as the iteration reaches it. */
export class PageIterator<T, C extends string | number = string> implements AsyncIterable<T> {
  readonly #fetch: (start: C | undefined) => Promise<PageData<T, C>>;
  readonly #start: C | undefined;

  constructor(fetch: (start: C | undefined) => Promise<PageData<T, C>>, start?: C) {
    this.#fetch = fetch;
    this.#start = start;
  }

  /** The first page only (one request). */
  firstPage(): Promise<Page<T, C>> {
    return this.#page(this.#start);
  }

  /** Each page in turn. */
  async *pages(): AsyncGenerator<Page<T, C>, void, undefined> {
    let page: Page<T, C> | null = await this.firstPage();
    while (page) {
      yield page;
      page = await page.nextPage();
    }
  }

  /** Each item in turn, across pages. */
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.items;
  }

  /** Every item in an array (all pages, or the first `max` items). */
  async toArray(max = Infinity): Promise<T[]> {
    const out: T[] = [];
    if (max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }

  async #page(start: C | undefined): Promise<Page<T, C>> {
    return new Page(await this.#fetch(start), (next) => this.#page(next));
  }
}
