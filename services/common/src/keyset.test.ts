import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidCursorError } from './errors.js';
import { decodeCursor, encodeCursor, newestFirst } from './keyset.js';

describe('keyset cursors', () => {
  const { key } = newestFirst();

  test('when a cursor was handed out, then it decodes to its key', () => {
    const k = ['2026-11-25T04:20:00.123456Z', 'run_1'];
    assert.deepEqual(decodeCursor(encodeCursor(k), key), k);
    assert.deepEqual(decodeCursor(encodeCursor(['a/b.txt']), [{ column: 'path' }]), ['a/b.txt']);
  });

  test('when a cursor is malformed or of another list, then InvalidCursorError (a 422 at the gateway)', () => {
    const bad = [
      'junk',
      'prf_nothing',
      '2026-11-25T04:20:00.000Z|run_1', // the old `<time>|<id>` form
      encodeCursor(['2026-11-25T04:20:00.123456Z', 'run_1']) + '!', // junk appended
      encodeCursor(['not-a-date', 'run_1']),
      encodeCursor(['2026-11-25T04:20:00.123456Z']), // a key of another shape
      encodeCursor(['2026-11-25T04:20:00.123456Z', '']),
      Buffer.from('{"a":1}').toString('base64url'),
    ];
    for (const cursor of bad) assert.throws(() => decodeCursor(cursor, key), InvalidCursorError, cursor);
  });
});
