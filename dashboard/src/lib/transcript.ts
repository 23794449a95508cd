/**
 * A browsercode run's events read as a terminal session and a list of tool uses (pure): every
 * `shell` call becomes a prompt line with its command, `terminal.output` chunks are written as
 * they came (their own ANSI colours intact), a non-zero exit is noted after the output.
 */

/** The fields of an event this module reads. */
export interface EventFacts {
  id: number;
  type: string;
  ts: string;
  data: Record<string, unknown>;
}

const ESC = '\x1b[';
const PROMPT = `${ESC}1;32m$${ESC}0m `;

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** What to write to the terminal for one event ('' when it shows nothing there). */
export function terminalChunk(e: EventFacts): string {
  if (e.type === 'tool.call' && e.data.tool === 'shell') {
    const input = e.data.input as Record<string, unknown> | undefined;
    const command = str(input?.command) ?? '';
    return `${PROMPT}${ESC}1m${command.replace(/\r?\n/g, '\r\n  ')}${ESC}0m\r\n`;
  }
  if (e.type === 'terminal.output') {
    const chunk = str(e.data.chunk) ?? '';
    // stderr without colours of its own is shown red, as a terminal user would tell it apart.
    return e.data.stream === 'stderr' && !chunk.includes('\x1b[') ? `${ESC}31m${chunk}${ESC}0m` : chunk;
  }
  if (e.type === 'tool.result' && e.data.tool === 'shell') {
    const code = e.data.exitCode;
    const notes: string[] = [];
    if (e.data.timedOut === true) notes.push('stopped at the time limit');
    else if (typeof code === 'number' && code !== 0) notes.push(`exit code ${code}`);
    if (e.data.truncated === true) notes.push('output cut');
    // A line of its own: output need not end with a newline.
    return notes.length ? `\r\n${ESC}2;31m[${notes.join(', ')}]${ESC}0m\r\n` : '\r\n';
  }
  return '';
}

/** The whole terminal transcript of `events`. */
export function terminalText(events: EventFacts[]): string {
  return events.map(terminalChunk).join('');
}

/** Whether the events hold any terminal work (else the terminal is not shown). */
export function hasTerminal(events: EventFacts[]): boolean {
  return events.some((e) => (e.type === 'tool.call' && e.data.tool === 'shell') || e.type === 'terminal.output');
}

/** One tool use: its call, and its result once it came. */
export interface ToolUse {
  number: number;
  tool: string;
  thought: string | null;
  input: Record<string, unknown>;
  ts: string;
  result?: { ok: boolean; output: string | null; error: string | null; data: Record<string, unknown> };
}

/** The tool uses of the events, in order; a result joins the call with its number. */
export function toolUses(events: EventFacts[]): ToolUse[] {
  const uses: ToolUse[] = [];
  const byNumber = new Map<number, ToolUse>();
  for (const e of events) {
    const n = typeof e.data.number === 'number' ? e.data.number : undefined;
    if (e.type === 'tool.call' && n !== undefined) {
      const use: ToolUse = {
        number: n,
        tool: str(e.data.tool) ?? 'tool',
        thought: str(e.data.thought) ?? null,
        input: (e.data.input as Record<string, unknown> | undefined) ?? {},
        ts: e.ts,
      };
      uses.push(use);
      byNumber.set(n, use);
    } else if (e.type === 'tool.result' && n !== undefined) {
      const use = byNumber.get(n);
      if (!use) continue;
      const { number: _n, tool: _t, ok, output, error, ...data } = e.data;
      use.result = { ok: ok === true, output: str(output) ?? null, error: str(error) ?? null, data };
    }
  }
  return uses;
}

/** A code block a tool use shows: a file written, a file read, a listing (null when none). */
export function codeBlockOf(use: ToolUse): { title: string; text: string } | null {
  const path = str(use.input.path);
  if (use.tool === 'write_file' && typeof use.input.content === 'string') return { title: path ?? 'file', text: use.input.content };
  if (use.tool === 'read_file' && use.result?.output) return { title: path ?? 'file', text: use.result.output };
  if (use.tool === 'list_files' && use.result?.output) return { title: 'files', text: use.result.output };
  return null;
}

/** A one-line summary of a tool use's input: the command, the path, the URL, … */
export function describeInput(use: ToolUse): string {
  const i = use.input;
  const first = str(i.command) ?? str(i.path) ?? str(i.url) ?? str(i.text) ?? str(i.query) ?? str(i.result);
  if (first !== undefined) return first;
  const rest = Object.entries(i).filter(([, v]) => v !== undefined && v !== null);
  return rest.map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', ');
}
