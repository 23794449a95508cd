import assert from 'node:assert/strict';
import { test } from 'node:test';
import { codeBlockOf, describeInput, hasTerminal, terminalText, toolUses, type EventFacts } from './transcript.ts';

let id = 0;
const ev = (type: string, data: Record<string, unknown>): EventFacts => ({ id: ++id, type, ts: '2026-01-01T00:00:00Z', data });

const events = [
  ev('run.started', { model: 'builtin' }),
  ev('tool.call', { number: 1, tool: 'shell', input: { command: 'ls --color=always' }, thought: 'look' }),
  ev('terminal.output', { stream: 'stdout', chunk: '\x1b[34mdir\x1b[0m\nfile.txt\n' }),
  ev('tool.result', { number: 1, tool: 'shell', ok: true, output: 'dir\nfile.txt', exitCode: 0 }),
  ev('tool.call', { number: 2, tool: 'shell', input: { command: 'false' }, thought: 'fail' }),
  ev('terminal.output', { stream: 'stderr', chunk: 'oops' }),
  ev('tool.result', { number: 2, tool: 'shell', ok: false, error: 'The command exited with code 1', exitCode: 1 }),
  ev('tool.call', { number: 3, tool: 'write_file', input: { path: 'notes.txt', sizeBytes: 5, content: 'hello' }, thought: 'save' }),
  ev('tool.result', { number: 3, tool: 'write_file', ok: true, output: 'Wrote notes.txt (5 bytes)', path: 'notes.txt', sizeBytes: 5 }),
];

test('when a browsercode run ran commands, then the transcript shows each prompt and command, the output with its own colours, and a failed exit', () => {
  const text = terminalText(events);
  assert.ok(text.includes('\x1b[1;32m$\x1b[0m \x1b[1mls --color=always\x1b[0m\r\n'));
  assert.ok(text.includes('\x1b[34mdir\x1b[0m\nfile.txt\n'), 'the output keeps its ANSI colours');
  assert.ok(text.includes('\x1b[31moops\x1b[0m'), 'plain stderr is shown red');
  assert.ok(text.includes('[exit code 1]'));
  assert.ok(!text.includes('notes.txt'), 'file tools are not terminal work');
  assert.equal(hasTerminal(events), true);
  assert.equal(hasTerminal([events[0]!, events[7]!]), false);
});

test('when tool uses are listed, then each call has its result and a written file shows as a code block', () => {
  const uses = toolUses(events);
  assert.deepEqual(uses.map((u) => [u.number, u.tool, u.result?.ok]), [
    [1, 'shell', true],
    [2, 'shell', false],
    [3, 'write_file', true],
  ]);
  assert.equal(uses[1]!.result!.error, 'The command exited with code 1');
  assert.deepEqual(codeBlockOf(uses[2]!), { title: 'notes.txt', text: 'hello' });
  assert.equal(codeBlockOf(uses[0]!), null);
  assert.equal(describeInput(uses[0]!), 'ls --color=always');
});
