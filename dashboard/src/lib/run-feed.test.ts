import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyFreshPage, mergeNewestFirst } from './run-feed.ts';

const r = (id: string, minute: number) => ({ id, createdAt: new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString() });

test('when two lists are merged, then items come newest first and none older than a list with more pages could still hold', () => {
  const a = { items: [r('a3', 30), r('a2', 20)], hasMore: true };
  const b = { items: [r('b3', 25), r('b2', 15), r('b1', 5)], hasMore: false };
  const m = mergeNewestFirst([a, b]);
  // b2 and b1 wait: list a may hold runs between minute 20 and minute 5.
  assert.deepEqual(m.items.map((x) => x.id), ['a3', 'b3', 'a2']);
  assert.equal(m.next, 0);
});

test('when every list is loaded to its end, then everything shows and there is nothing to page', () => {
  const m = mergeNewestFirst([
    { items: [r('a1', 10)], hasMore: false },
    { items: [r('b2', 20), r('b1', 1)], hasMore: false },
  ]);
  assert.deepEqual(m.items.map((x) => x.id), ['b2', 'a1', 'b1']);
  assert.equal(m.next, null);
});

test('when a fresh first page arrives, then changed items are replaced, new ones added and older loaded ones kept', () => {
  const loaded = { items: [r('x3', 30), r('x2', 20), r('x1', 10)], hasMore: true };
  const fresh = { items: [r('x4', 40), { ...r('x3', 30), status: 'completed' }], hasMore: true };
  const got = applyFreshPage(loaded, fresh);
  assert.deepEqual(got.items.map((x) => x.id), ['x4', 'x3', 'x2', 'x1']);
  assert.equal((got.items[1] as { status?: string }).status, 'completed');
  assert.equal(got.hasMore, true);
});
