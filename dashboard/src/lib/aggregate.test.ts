import assert from 'node:assert/strict';
import { test } from 'node:test';
import { browserMinutesPerDay, lastDays, runsPerDay, successRate, totals, totalsByModel, type RunFacts } from './aggregate.ts';

const at = (y: number, m: number, d: number, h = 12, min = 0) => new Date(y, m - 1, d, h, min).toISOString();
const run = (createdAt: string, status: string, model = 'builtin', cost = '0', inTok = 0, outTok = 0): RunFacts => ({
  status,
  model,
  createdAt,
  totalCostUsd: cost,
  totalInputTokens: inTok,
  totalOutputTokens: outTok,
});

test('when the last 3 days are asked, then they end today, in calendar order', () => {
  const now = new Date(2026, 2, 12, 15, 0).getTime();
  const r = lastDays(3, now);
  assert.deepEqual(r.days, ['2026-03-10', '2026-03-11', '2026-03-12']);
  assert.equal(r.from, new Date(2026, 2, 10).getTime());
  assert.equal(r.to, new Date(2026, 2, 13).getTime());
});

test('when runs are counted per day, then each lands on its local day by how it ended; runs outside the range are left out', () => {
  const range = lastDays(3, new Date(2026, 2, 12, 15).getTime());
  const got = runsPerDay(
    [run(at(2026, 3, 10), 'completed'), run(at(2026, 3, 10, 23, 59), 'failed'), run(at(2026, 3, 12, 0, 1), 'running'), run(at(2026, 3, 12), 'stopped'), run(at(2026, 3, 9, 23, 59), 'completed')],
    range,
  );
  assert.deepEqual(got.completed, [1, 0, 0]);
  assert.deepEqual(got.failed, [1, 0, 0]);
  assert.deepEqual(got.active, [0, 0, 1]);
  assert.deepEqual(got.stopped, [0, 0, 1]);
});

test('when a browser runs across midnight, then its minutes are split between the two days; a running one counts until now', () => {
  const now = new Date(2026, 2, 12, 1, 0).getTime();
  const range = lastDays(2, now);
  const minutes = browserMinutesPerDay(
    [
      { createdAt: at(2026, 3, 11, 23, 30), stoppedAt: at(2026, 3, 12, 0, 15) },
      { createdAt: at(2026, 3, 12, 0, 50), stoppedAt: null },
      { createdAt: at(2026, 3, 9, 10), stoppedAt: at(2026, 3, 9, 11) },
    ],
    range,
    now,
  );
  assert.deepEqual(minutes, [30, 25]);
});

test('when the success rate is computed, then stopped and unfinished runs are neither success nor failure', () => {
  assert.equal(successRate([]), null);
  assert.equal(successRate([run(at(2026, 1, 1), 'stopped'), run(at(2026, 1, 1), 'running')]), null);
  assert.equal(successRate([run(at(2026, 1, 1), 'completed'), run(at(2026, 1, 1), 'completed'), run(at(2026, 1, 1), 'completed'), run(at(2026, 1, 1), 'failed'), run(at(2026, 1, 1), 'stopped')]), 0.75);
});

test('when totals are taken per model, then cost strings and tokens add up, the most expensive model first', () => {
  const runs = [
    run(at(2026, 1, 1), 'completed', 'builtin', '0', 0, 0),
    run(at(2026, 1, 1), 'completed', 'gpt-4o-mini', '0.0015', 1000, 200),
    run(at(2026, 1, 1), 'failed', 'gpt-4o-mini', '0.0025', 3000, 100),
    run(at(2026, 1, 1), 'completed', 'builtin', '0', 0, 0),
  ];
  const by = totalsByModel(runs);
  assert.deepEqual(
    by.map((t) => [t.model, t.runs, Number(t.costUsd.toFixed(6)), t.inputTokens, t.outputTokens]),
    [
      ['gpt-4o-mini', 2, 0.004, 4000, 300],
      ['builtin', 2, 0, 0, 0],
    ],
  );
  const sum = totals(runs);
  assert.equal(sum.runs, 4);
  assert.equal(sum.inputTokens, 4000);
});
