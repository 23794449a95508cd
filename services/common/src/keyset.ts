/**
 * Keyset paging, the one way the repositories page a list: a page is the rows after the sort key
 * of the previous page's last row, so a row added or removed meanwhile neither repeats nor skips
 * one, and no page costs more than its own rows. The cursor a client holds is that key, opaque
 * (base64url JSON); one that does not decode to a key of the list's shape was never handed out
 * and is refused (InvalidCursorError, a 422 at the gateway) rather than starting over at page one.
 */
import type { Knex } from './db.js';
import { InvalidCursorError } from './errors.js';

/** A column of the sort key; `time` for a timestamp (kept in the cursor to the microsecond, UTC). */
export interface KeyColumn {
  column: string;
  time?: boolean;
}

/** One page of a list. `nextCursor` is '' on the last page. */
export interface Page<T> {
  items: T[];
  hasMore: boolean;
  nextCursor: string;
}

/** Newest first by creation, ties by id: the order of the user-facing lists. */
export const newestFirst = (alias?: string): { key: KeyColumn[]; order: 'desc' } => {
  const p = alias ? `${alias}.` : '';
  return { key: [{ column: `${p}created_at`, time: true }, { column: `${p}id` }], order: 'desc' };
};

const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The cursor of a sort key. */
export function encodeCursor(key: readonly string[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** The sort key in `cursor`, checked against the list's key columns; InvalidCursorError when it is not one. */
export function decodeCursor(cursor: string, columns: readonly KeyColumn[]): string[] {
  let key: unknown;
  try {
    // Node's base64url decoder skips what is not base64url: re-encoding tells a cursor from junk.
    const bytes = Buffer.from(cursor, 'base64url');
    if (bytes.toString('base64url') !== cursor) throw new InvalidCursorError();
    key = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new InvalidCursorError();
  }
  if (!Array.isArray(key) || key.length !== columns.length) throw new InvalidCursorError();
  columns.forEach((c, i) => {
    const v = key[i];
    if (typeof v !== 'string' || !v || (c.time && (!TIME.test(v) || Number.isNaN(Date.parse(v))))) throw new InvalidCursorError();
  });
  return key as string[];
}

/**
 * The page of `q` after `cursor` in the order of `key` (every column `order`), at most `limit`
 * rows, each read with `map`. `q` must select its columns (the key is selected beside them).
 */
export async function keysetPage<T>(
  knex: Knex,
  q: Knex.QueryBuilder,
  o: { key: readonly KeyColumn[]; order: 'asc' | 'desc'; limit: number; cursor: string | undefined; map: (row: any) => T },
): Promise<Page<T>> {
  const cols = o.key.map((c) => c.column);
  const alias = (i: number) => `keyset_${i}`;
  q.select(
    o.key.map((c, i) =>
      c.time ? knex.raw(`to_char(?? at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ??`, [c.column, alias(i)]) : knex.raw('??::text as ??', [c.column, alias(i)]),
    ),
  );
  if (o.cursor) {
    const after = decodeCursor(o.cursor, o.key);
    const values = o.key.map((c) => (c.time ? '?::timestamptz' : '?')).join(', ');
    q.whereRaw(`(${cols.map(() => '??').join(', ')}) ${o.order === 'desc' ? '<' : '>'} (${values})`, [...cols, ...after]);
  }
  const rows: any[] = await q.orderBy(cols.map((column) => ({ column, order: o.order }))).limit(o.limit + 1);
  const hasMore = rows.length > o.limit;
  const last = rows[o.limit - 1];
  return {
    items: rows.slice(0, o.limit).map(o.map),
    hasMore,
    nextCursor: hasMore ? encodeCursor(o.key.map((_, i) => String(last[alias(i)]))) : '',
  };
}
