import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, formatCost, formatDuration, formatPercent, formatTokens, formatWhen, runDurationMs, taskTitle } from './format.ts';

test('when durations are formatted, then each magnitude reads in its own unit', () => {
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(4249), '4.2 s');
  assert.equal(formatDuration(42_000), '42 s');
  assert.equal(formatDuration(185_000), '3 min 5 s');
  assert.equal(formatDuration(180_000), '3 min');
  assert.equal(formatDuration(2 * 3600_000 + 10 * 60_000), '2 h 10 min');
  assert.equal(formatDuration(-1), '—');
});

test('when a run has not started, then it has no duration; a running one counts until now', () => {
  assert.equal(runDurationMs({ startedAt: null, finishedAt: null }), null);
  const now = Date.parse('2026-01-01T00:01:00Z');
  assert.equal(runDurationMs({ startedAt: '2026-01-01T00:00:00Z', finishedAt: null }, now), 60_000);
  assert.equal(runDurationMs({ startedAt: '2026-01-01T00:00:00Z', finishedAt: '2026-01-01T00:00:02.5Z' }, now), 2500);
});

test('when costs are formatted, then a small cost keeps two significant digits instead of rounding to $0.00', () => {
  assert.equal(formatCost('0'), '$0');
  assert.equal(formatCost('0.000000'), '$0');
  assert.equal(formatCost('0.0042137'), '$0.0042');
  assert.equal(formatCost('0.5'), '$0.5');
  assert.equal(formatCost('12.345'), '$12.35');
  assert.equal(formatCost('not a number'), '—');
});

test('when token counts and sizes are formatted, then they use k/M and KB/MB', () => {
  assert.equal(formatTokens(950), '950');
  assert.equal(formatTokens(12_345), '12.3k');
  assert.equal(formatTokens(4_500_000), '4.5M');
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(3482), '3.4 KB');
  assert.equal(formatBytes(12 * 1024 * 1024), '12 MB');
});

test('when ratios are formatted, then none is a dash and small ones keep a decimal', () => {
  assert.equal(formatPercent(null), '—');
  assert.equal(formatPercent(1), '100%');
  assert.equal(formatPercent(0.8731), '87%');
  assert.equal(formatPercent(0.055), '5.5%');
});

test('when moments are formatted, then recent ones are relative and older ones dated', () => {
  const now = new Date(2026, 2, 12, 15, 0, 0).getTime();
  assert.equal(formatWhen(new Date(now - 20_000).toISOString(), now), 'just now');
  assert.equal(formatWhen(new Date(now - 5 * 60_000).toISOString(), now), '5 min ago');
  assert.equal(formatWhen(new Date(now - 3 * 3600_000).toISOString(), now), '3 h ago');
  assert.equal(formatWhen(new Date(2026, 2, 11, 14, 5).toISOString(), now), 'yesterday 14:05');
  assert.equal(formatWhen(new Date(2026, 0, 2, 9, 7).toISOString(), now), '2 Jan 09:07');
  assert.equal(formatWhen(new Date(2025, 11, 24, 9, 7).toISOString(), now), '24 Dec 2025 09:07');
  assert.equal(formatWhen(null, now), '—');
});

test('when a task is long or has several lines, then its title is the first line, cut with an ellipsis', () => {
  assert.equal(taskTitle('Open the page.\nThen read it.'), 'Open the page.');
  assert.equal(taskTitle('x'.repeat(200), 10), `${'x'.repeat(9)}…`);
});
