/**
 * The shell examples of a README, run as a user would type them into one terminal (see
 * test/readme-examples.test.ts for the convention and the substitutions).
 *
 * - A fenced block whose language is `sh`, `bash` or `shell` runs; `no-run` after the language
 *   (```` ```sh no-run ````) shows it only. Blocks of any other language are shown only.
 * - All runnable blocks of one README run in order in one bash session (`set -Eeuo pipefail`), so
 *   variables set in one block are there in the next.
 * - A line of its own `# {…}` or `# […]` right after a command is that command's expected output:
 *   JSON in which `…` elides (see {@link matches}).
 * - `curl` is a shell function around the real one: a reply with an HTTP status of 400 or more
 *   fails the command, unless the expected output that follows is an error body (`{"detail": …}`).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

/** One fenced block of a README. */
export interface Block {
  /** 1-based line of the block's first content line. */
  line: number;
  lang: string;
  runs: boolean;
  lines: string[];
}

const RUNNABLE = new Set(['sh', 'bash', 'shell']);

/** The fenced blocks of a Markdown text (indented fences too, as in list items). */
export function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)\s*(.*)$/.exec(lines[i]!);
    // As in CommonMark: the info string of a backtick fence holds no backtick (else it is inline code).
    if (!open || (open[2]!.startsWith('`') && open[4]!.includes('`'))) continue;
    const [, indent, fence, lang, rest] = open as unknown as [string, string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(lines[j]!)) {
      body.push(lines[j]!.startsWith(indent) ? lines[j]!.slice(indent.length) : lines[j]!.trimStart());
      j++;
    }
    const flags = rest.split(/\s+/).filter(Boolean);
    out.push({ line: i + 2, lang: lang.toLowerCase(), runs: RUNNABLE.has(lang.toLowerCase()) && !flags.includes('no-run'), lines: body });
    i = j;
  }
  return out;
}

// ---- expected output: JSON with `…` ----

/** Any value (a bare `…` where a value goes). */
const ANY = Symbol('any');
/** "and more": a bare `…` as an array element or an object member. */
const MORE = Symbol('more');
type Expected = null | boolean | number | string | typeof ANY | { more: boolean; items: Expected[] } | { more: boolean; members: Map<string, Expected> };

/**
 * Parses the JSON of an expected output, where a bare `…` is allowed: as a value it matches any
 * value; as the last element of an array it allows more elements; as a member of an object it
 * allows more members. Inside a string, `…` matches any run of characters.
 */
export function parseExpected(text: string): Expected {
  let i = 0;
  const ws = () => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const fail = (what: string): never => {
    throw new Error(`expected output is not JSON (with …): ${what} at character ${i} of ${text}`);
  };
  const value = (): Expected | typeof MORE => {
    ws();
    const c = text[i];
    if (c === '…') {
      i++;
      return MORE;
    }
    if (c === '{') {
      i++;
      const members = new Map<string, Expected>();
      let more = false;
      ws();
      if (text[i] === '}') return i++, { more, members };
      for (;;) {
        ws();
        if (text[i] === '…') {
          i++;
          more = true;
        } else {
          if (text[i] !== '"') fail('a member name');
          const key = string();
          ws();
          if (text[i++] !== ':') fail('":"');
          const v = value();
          members.set(key, v === MORE ? ANY : v);
        }
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return i++, { more, members };
        else fail('"," or "}"');
      }
    }
    if (c === '[') {
      i++;
      const items: Expected[] = [];
      let more = false;
      ws();
      if (text[i] === ']') return i++, { more, items };
      for (;;) {
        const v = value();
        if (v === MORE) more = true;
        else if (more) fail('an element after "…" (it may only end an array)');
        else items.push(v);
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return i++, { more, items };
        else fail('"," or "]"');
      }
    }
    if (c === '"') return string();
    const lit = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i));
    if (!lit) return fail('a value');
    i += lit[0].length;
    return JSON.parse(lit[0]) as Expected;
  };
  const string = (): string => {
    const m = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i));
    if (!m) return fail('a string');
    i += m[0].length;
    return JSON.parse(m[0]) as string;
  };
  const v = value();
  ws();
  if (i !== text.length) fail('the end');
  return v === MORE ? ANY : v;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Why `actual` does not match `expected` (undefined when it does); `at` names the place. */
export function mismatch(expected: Expected, actual: unknown, at = '$'): string | undefined {
  if (expected === ANY) return undefined;
  if (typeof expected === 'string') {
    if (typeof actual !== 'string') return `${at}: expected a string, got ${JSON.stringify(actual)}`;
    const ok = expected.includes('…') ? new RegExp(`^${expected.split('…').map(escapeRe).join('[\\s\\S]*')}$`).test(actual) : expected === actual;
    return ok ? undefined : `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  }
  if (expected === null || typeof expected !== 'object') return Object.is(expected, actual) ? undefined : `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  if ('items' in expected) {
    if (!Array.isArray(actual)) return `${at}: expected an array, got ${JSON.stringify(actual)}`;
    if (actual.length < expected.items.length || (!expected.more && actual.length !== expected.items.length)) return `${at}: expected ${expected.items.length}${expected.more ? ' or more' : ''} elements, got ${actual.length}`;
    for (const [n, e] of expected.items.entries()) {
      const why = mismatch(e, actual[n], `${at}[${n}]`);
      if (why) return why;
    }
    return undefined;
  }
  if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return `${at}: expected an object, got ${JSON.stringify(actual)}`;
  const keys = Object.keys(actual);
  for (const [k, e] of expected.members) {
    if (!(k in actual)) return `${at}: no member "${k}"`;
    const why = mismatch(e, (actual as Record<string, unknown>)[k], `${at}.${k}`);
    if (why) return why;
  }
  const extra = keys.filter((k) => !expected.members.has(k));
  return !expected.more && extra.length ? `${at}: members not in the README: ${extra.join(', ')} (write … to elide them)` : undefined;
}

/** Whether an expected output shows an error reply, whose HTTP status is then not a failure. */
function showsError(e: Expected): boolean {
  return e !== null && typeof e === 'object' && 'members' in e && e.members.has('detail');
}

/**
 * Checks one command's output against its expected output: the whole output as JSON, else its last
 * line, else the JSON value that ends it (curl prints no newline, so replies of commands before it
 * may share its line).
 */
export function checkOutput(expected: Expected, output: string): string | undefined {
  const lastLine = output.trim().split('\n').at(-1)!.trim();
  const ending = [...lastLine.matchAll(/[[{]/g)].map((m) => lastLine.slice(m.index)).find((tail) => {
    try {
      JSON.parse(tail);
      return true;
    } catch {
      return false;
    }
  });
  const candidates = [output.trim(), lastLine, ...(ending ? [ending] : [])];
  let why = `the output is not JSON: ${JSON.stringify(output.slice(-500))}`;
  for (const c of candidates) {
    let actual: unknown;
    try {
      actual = JSON.parse(c);
    } catch {
      continue;
    }
    const m = mismatch(expected, actual);
    if (!m) return undefined;
    why = `${m}\n  output: ${c.slice(0, 2000)}`;
  }
  return why;
}

// ---- the session ----

/** Where a failure is: the README line, and the block (with its lines) it is in. */
export interface Failure {
  line: number;
  message: string;
  block: Block;
  output: string;
}

interface Expectation {
  /** README line of the `# …` comment. */
  line: number;
  expected: Expected;
  block: Block;
}

/** Options of {@link runReadme}. */
export interface RunReadmeOptions {
  /** README file name, for messages. */
  file: string;
  markdown: string;
  /** Mechanical substitutions applied to every runnable line and expected output, in order. */
  substitute: (text: string) => string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Longest time one block may run. */
  blockTimeoutMs: number;
}

const MARK = '\x1e';
const markRe = new RegExp(`\\n?${MARK}([BED]) (\\d+)${MARK}\\n`, 'g');

/** The start of the session: failure on any error naming its line, and `curl` that fails on an HTTP error status. */
const PRELUDE = fs.readFileSync(new URL('./readme-session.sh', import.meta.url), 'utf8');
const PRELUDE_LINES = PRELUDE.split('\n').length - 1;

let namespaces: boolean | undefined;
/**
 * Whether the session can run in a PID namespace of its own: then nothing an example starts
 * outlives it (a server started in the background, a detached child), since the kernel ends every
 * process of the namespace with its first. Else the session's process group is all that is ended.
 */
export function pidNamespace(): boolean {
  namespaces ??= spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true'], { stdio: 'ignore' }).status === 0;
  return namespaces;
}

/**
 * Runs the README's runnable blocks in one bash session and checks each expected output. Returns
 * the first failure (a failing command, an unmet expectation or a block past its time), or
 * undefined when every block ran as its README says.
 */
export async function runReadme(o: RunReadmeOptions): Promise<{ failure: Failure | undefined; blocks: number }> {
  const blocks = fencedBlocks(o.markdown).filter((b) => b.runs);
  const script: string[] = [];
  /** README line of each script line (after the prelude); 0 for a line of the runner's own. */
  const readmeLine: number[] = [];
  const expectations: Expectation[] = [];
  const blockOfLine: Block[] = [];
  const own = (line: string, block: Block) => {
    script.push(line);
    readmeLine.push(0);
    blockOfLine.push(block);
  };
  blocks.forEach((block, b) => {
    own(`__ats_mark B ${b}`, block);
    block.lines.forEach((raw, n) => {
      const line = block.line + n;
      const expect = /^\s*#\s*([[{].*)$/.exec(raw);
      if (expect && n > 0 && !/\\\s*$/.test(block.lines[n - 1]!)) {
        const expected = parseExpected(o.substitute(expect[1]!));
        const e = expectations.push({ line, expected, block }) - 1;
        // The allowance for an error status ends with the command it was for.
        script.push(`__ats_mark E ${e}; unset ATS_HTTP_ERROR_EXPECTED`);
      } else {
        script.push(o.substitute(raw));
      }
      readmeLine.push(line);
      blockOfLine.push(block);
    });
    own(`__ats_mark D ${b}`, block);
  });
  // An error body shown as the expected output allows the HTTP error status of the command before it.
  for (const x of expectations) {
    if (!showsError(x.expected)) continue;
    let start = readmeLine.indexOf(x.line) - 1;
    while (readmeLine[start - 1] && /\\\s*$/.test(script[start - 1]!)) start--;
    script[start] = `ATS_HTTP_ERROR_EXPECTED=1; ${script[start]}`;
  }
  if (!blocks.length) return { failure: undefined, blocks: 0 };

  const bash = ['bash', '-c', PRELUDE + script.join('\n') + '\n'];
  const [cmd, ...args] = pidNamespace() ? ['unshare', '--pid', '--fork', '--kill-child', ...bash] : bash;
  const child = spawn(cmd!, args, { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  let current = -1;
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, o.blockTimeoutMs);
  };
  arm();
  const onData = (c: string) => {
    out += c;
    for (const m of out.matchAll(new RegExp(`${MARK}B (\\d+)${MARK}`, 'g'))) {
      if (Number(m[1]) > current) {
        current = Number(m[1]);
        arm();
      }
    }
  };
  // Decoded as a stream: a character split between two reads (… is three bytes) stays whole.
  child.stdout.setEncoding('utf8').on('data', onData);
  child.stderr.setEncoding('utf8').on('data', onData);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);

  // Split the output by the markers: what each block and each expected command printed.
  const blockOut = new Map<number, string>();
  const expOut = new Map<number, string>();
  let seg = '';
  let block = -1;
  let last = 0;
  for (const m of out.matchAll(markRe)) {
    const text = out.slice(last, m.index);
    last = m.index + m[0].length;
    seg += text;
    if (block >= 0) blockOut.set(block, (blockOut.get(block) ?? '') + text);
    const n = Number(m[2]);
    if (m[1] === 'B') {
      block = n;
      seg = '';
    } else if (m[1] === 'E') {
      expOut.set(n, seg);
      seg = '';
    } else if (m[1] === 'D') {
      block = -1;
    }
  }
  const tail = out.slice(last);
  if (block >= 0) blockOut.set(block, (blockOut.get(block) ?? '') + tail);
  // The ERR trap's mark: the script line of the command that failed.
  const failedAt = /\x1eF (\d+)\x1e/.exec(out)?.[1];

  const show = (b: Block) => (blockOut.get(blocks.indexOf(b)) ?? '').replace(/\x1eF \d+\x1e\n?/g, '').trim();
  for (const [e, x] of expectations.entries()) {
    const got = expOut.get(e);
    if (got === undefined) break; // the session ended before this command: the failure below says why
    const why = checkOutput(x.expected, got);
    if (why) return { blocks: blocks.length, failure: { line: x.line, message: `the output does not match the expected output on line ${x.line}: ${why}`, block: x.block, output: show(x.block) } };
  }
  if (timedOut) {
    const b = blocks[Math.max(current, 0)]!;
    return { blocks: blocks.length, failure: { line: b.line, message: `the block did not finish within ${o.blockTimeoutMs / 1000} s`, block: b, output: show(b) } };
  }
  if (code !== 0) {
    const idx = failedAt !== undefined ? Number(failedAt) - PRELUDE_LINES - 1 : -1;
    let line = readmeLine[idx] ?? 0;
    const b = blockOfLine[idx] ?? blocks[Math.max(current, 0)]!;
    // bash names a line inside a command continued with "\": name the line it starts on.
    while (line > b.line && /\\\s*$/.test(b.lines[line - 1 - b.line]!)) line--;
    return { blocks: blocks.length, failure: { line: line || b.line, message: `the command exited with status ${code}`, block: b, output: show(b) } };
  }
  return { blocks: blocks.length, failure: undefined };
}

/** A failure as the test reports it: the README and line, why, the block with its lines numbered, and what it printed. */
export function describeFailure(file: string, f: Failure): string {
  const src = f.block.lines.map((l, n) => `${String(f.block.line + n).padStart(5)}${f.block.line + n === f.line ? ' >' : '  '} ${l}`).join('\n');
  return `${file}:${f.line}: ${f.message}\n--- the block (${file}:${f.block.line}) ---\n${src}\n--- its output ---\n${f.output || '(none)'}`;
}
