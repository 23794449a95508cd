/**
 * Merging newest-first pages of several lists (the runs of each agent) into one newest-first
 * list that never skips an item: an item is shown only when no list with more pages could still
 * hold a newer one (pure).
 */

/** One list as loaded so far. */
export interface LoadedList<T> {
  items: T[];
  hasMore: boolean;
}

export interface Merged<T> {
  items: T[];
  /** The list to page next to show more (the one whose loaded items end newest), or null when all are loaded. */
  next: number | null;
}

type Dated = { id: string; createdAt: string };

function newestFirst(a: Dated, b: Dated): number {
  return Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

export function mergeNewestFirst<T extends Dated>(lists: LoadedList<T>[]): Merged<T> {
  let floor = -Infinity;
  let next: number | null = null;
  lists.forEach((l, i) => {
    if (!l.hasMore) return;
    const oldest = l.items.length ? Date.parse(l.items[l.items.length - 1]!.createdAt) : Infinity;
    if (oldest > floor) {
      floor = oldest;
      next = i;
    }
  });
  const items = lists
    .flatMap((l) => l.items)
    .filter((r) => Date.parse(r.createdAt) >= floor)
    .sort(newestFirst);
  return { items, next };
}

/**
 * A loaded list with a fresh first page applied: items of the fresh page replace their old
 * versions, new ones are added; older loaded items stay (they are updated one by one elsewhere).
 */
export function applyFreshPage<T extends Dated>(loaded: LoadedList<T>, fresh: LoadedList<T>): LoadedList<T> {
  if (!loaded.items.length) return fresh;
  const freshIds = new Set(fresh.items.map((r) => r.id));
  const oldestFresh = fresh.items.length ? Date.parse(fresh.items[fresh.items.length - 1]!.createdAt) : Infinity;
  // Loaded items the fresh page should have held but did not (deleted or filtered out now) go.
  const rest = loaded.items.filter((r) => !freshIds.has(r.id) && Date.parse(r.createdAt) < oldestFresh);
  const hasMore = rest.length ? loaded.hasMore : fresh.hasMore;
  return { items: [...fresh.items, ...rest].sort(newestFirst), hasMore };
}

/** The list with `item` in place of the one with its id. */
export function replaceById<T extends { id: string }>(items: T[], item: T): T[] {
  return items.map((r) => (r.id === item.id ? item : r));
}
