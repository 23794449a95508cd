import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stepAt, stepOffsetSeconds } from './recording.ts';
import { resultView } from './result.ts';

test('when a result is JSON (bare or fenced), then it is pretty-printed; anything else is Markdown', () => {
  assert.deepEqual(resultView('[{"a":1}]'), { kind: 'json', text: '[\n  {\n    "a": 1\n  }\n]' });
  assert.deepEqual(resultView('```json\n{"b":2}\n```'), { kind: 'json', text: '{\n  "b": 2\n}' });
  assert.deepEqual(resultView('# Title\n\nSome *text*'), { kind: 'markdown', text: '# Title\n\nSome *text*' });
  assert.deepEqual(resultView('{not json'), { kind: 'markdown', text: '{not json' });
  assert.deepEqual(resultView(null), { kind: 'empty' });
});

test('when a result carries a command’s colours, then the escape codes are taken out, the text kept', () => {
  assert.deepEqual(resultView('\x1b[31mred alert\x1b[0m and plain\r\nnext'), { kind: 'markdown', text: 'red alert and plain\nnext' });
  assert.deepEqual(resultView('\x1b]0;title\x07done'), { kind: 'markdown', text: 'done' });
});

test('when a result is a command’s aligned output, then it is shown as is; a Markdown list or table stays Markdown', () => {
  const ls = 'total 8\ndrwxr-xr-x  2 root root 4096 Nov 25 14:37 .\ndrwxr-xr-x 21 root root 4096 Nov 25 14:37 ..\n-rw-r--r--  1 root root    5 Nov 25 15:26 notes.txt';
  assert.equal(resultView(ls).kind, 'text');
  assert.equal(resultView('- a  b\n- c  d\n- e  f').kind, 'markdown');
  assert.equal(resultView('| a |  b |\n|---|---|\n| 1 |  2 |').kind, 'markdown');
  assert.equal(resultView('One line.\nAnother line.\nA third.').kind, 'markdown');
});

test('when a step is looked up in a recording, then its offset is its start after the browser began, and a time maps back to the step showing', () => {
  const created = '2026-01-01T00:00:00Z';
  const steps = [
    { number: 1, ts: '2026-01-01T00:00:02Z' },
    { number: 2, ts: '2026-01-01T00:00:05.5Z' },
  ];
  assert.equal(stepOffsetSeconds(steps[1]!.ts, created), 5.5);
  assert.equal(stepOffsetSeconds('2025-12-31T23:59:59Z', created), 0);
  assert.equal(stepAt(steps, created, 1), null);
  assert.equal(stepAt(steps, created, 3), 1);
  assert.equal(stepAt(steps, created, 5.5), 2);
});
