/**
 * The one table of actions an agent can take. Each entry declares an action once: its name, the
 * tool name and description an LLM sees, its input schema (and TypeScript type), how it reads in
 * a step, the words and example instructions the builtin interpreter understands for it, and
 * how it acts. The LLM tools (llm-model.ts), the builtin's vocabulary (builtin-model.ts), the
 * dispatcher (`runBrowserAction` / `runCodeAction`) and the `Action` type are derived from it,
 * so adding an action is one entry here.
 *
 * Kinds: `browser` actions work in the run's browser (both agents); `code` actions work on the
 * run's disk and terminal (browsercode only); `answer` ends the turn.
 */
import type { Browser, Page } from 'puppeteer-core';
import { listDiskFiles, readDiskFile, runShellTool, writeDiskFile, type CodeToolContext, type ToolOutcome } from './code-tools.js';
import type { RunDownloads } from './downloads.js';
import { deliverExtract, extract, ExtractError, findText, type AskPage, type ExtractInput, type ExtractWhat } from './page-extract.js';
import { ActionError, clickElement, dragElement, element, openUrl, pressKeys, scrollWithin, selectOption, typeInto, uploadFile, waitOn } from './page-tools.js';

export type { ExtractWhat } from './page-extract.js';
export type ScrollDirection = 'down' | 'up' | 'bottom' | 'top';

/** A JSON Schema property of a tool's input. */
export interface Prop {
  type?: string | string[];
  enum?: string[];
  description?: string;
}

type RequiredKeys<I> = { [K in keyof I]-?: object extends Pick<I, K> ? never : K }[keyof I] & string;

/** An action's input: a JSON Schema property for every field of `I`, and which are required. */
export interface InputSchema<I> {
  properties: { [K in keyof I]-?: Prop };
  required: RequiredKeys<I>[];
}

/** The input schema of an action whose input type is `I`. */
const input = <I = Record<never, never>>(properties: { [K in keyof I]-?: Prop }, required: RequiredKeys<I>[] = []): InputSchema<I> => ({ properties, required });

/** What browser actions work with. */
export interface BrowserActionContext {
  browser: Browser;
  page: Page;
  /** Where disk files live (uploads, long extractions); paths never leave it. */
  diskDir?: string | undefined;
  timeoutMs: number;
  signal: AbortSignal;
  /** Answers `extract` questions (an LLM's separate call); without it only deterministic extractions work. */
  ask?: AskPage | undefined;
  /** The files the browser downloaded (read_download); undefined when the run cannot see them. */
  downloads?: RunDownloads | undefined;
}

/** What a browser action gave: the page to observe next (switching tabs changes it), what it read, and what the page did otherwise than asked. */
export interface BrowserOutcome {
  page?: Page;
  output?: string;
  /** A field that holds another value than typed, a box that did not scroll: told to the model with the step, never part of an answer. */
  note?: string;
}

interface Common<I> {
  /** The tool an LLM calls. */
  tool: string;
  /** What the LLM is told of the tool; left out where its name and input say it all (every request carries every character). */
  description?: string;
  input: InputSchema<I>;
  /** The action in a few words, as a step's `action` and the history show it. */
  describe(a: I): string;
  /** The builtin interpreter: words that begin such an instruction, and example instructions (each parses; see builtin-model.test.ts). */
  builtin?: { verbs: string[]; examples: string[] };
}
interface BrowserSpec<I> extends Common<I> {
  kind: 'browser';
  run(a: I, c: BrowserActionContext): Promise<BrowserOutcome>;
}
interface CodeSpec<I> extends Common<I> {
  kind: 'code';
  run(a: I, c: CodeToolContext): Promise<ToolOutcome>;
}
interface AnswerSpec<I> extends Common<I> {
  kind: 'answer';
}

const browser = <I>(s: Omit<BrowserSpec<I>, 'kind'>): BrowserSpec<I> => ({ kind: 'browser', ...s });
const code = <I>(s: Omit<CodeSpec<I>, 'kind'>): CodeSpec<I> => ({ kind: 'code', ...s });

/** A reading the page cannot give is an action error the model is told about. */
const reportable = (err: unknown): never => {
  throw err instanceof ExtractError ? new ActionError(err.message) : err;
};

/** An action's outcome with its note (what the page did instead of what was asked), if any. */
const noted = (note: string | undefined): BrowserOutcome => (note !== undefined ? { note } : {});

const short = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);
// The system prompt says what an [index] is; the tools do not repeat it.
const index: Prop = { type: 'integer' };
const text: Prop = { type: 'string' };

export const ACTIONS = {
  navigate: browser({
    tool: 'navigate',
    input: input<{ url: string }>({ url: text }, ['url']),
    describe: (a) => `navigate ${a.url}`,
    builtin: { verbs: ['open', 'go', 'navigate', 'visit', 'load', 'browse'], examples: ['open <url>'] },
    run: async (a, c) => {
      await openUrl(c.page, a.url, c.timeoutMs);
      return {};
    },
  }),
  click: browser({
    tool: 'click',
    input: input<{ index: number }>({ index }, ['index']),
    describe: (a) => `click [${a.index}]`,
    builtin: { verbs: ['click', 'tap', 'hit', 'follow'], examples: ["click 'Text'", 'click the first link'] },
    run: async (a, c) => ({ page: await clickElement(c.browser, c.page, a.index, c.timeoutMs) }),
  }),
  type: browser({
    tool: 'type',
    description: "Replace a field's text (dates etc. in the format shown); submit: Enter after",
    input: input<{ index: number; text: string; submit?: boolean }>({ index, text, submit: { type: 'boolean' } }, ['index', 'text']),
    describe: (a) => `type ${JSON.stringify(short(a.text, 60))} into [${a.index}]${a.submit ? ' and submit' : ''}`,
    builtin: { verbs: ['type', 'enter', 'input', 'put', 'fill', 'search', 'set', 'change'], examples: ["type 'value' into 'Field'", "search for 'words'", 'set the date field to 2025-03-14'] },
    run: async (a, c) => noted(await typeInto(c.page, a.index, a.text, !!a.submit, c.timeoutMs)),
  }),
  select: browser({
    tool: 'select',
    description: 'Pick a <select> option by its text',
    input: input<{ index: number; option: string }>({ index, option: text }, ['index', 'option']),
    describe: (a) => `select ${JSON.stringify(a.option)} in [${a.index}]`,
    builtin: { verbs: ['select', 'choose', 'pick'], examples: ["select 'Option' from 'Field'"] },
    run: async (a, c) => noted(await selectOption(c.page, a.index, a.option, c.timeoutMs)),
  }),
  press: browser({
    tool: 'press',
    description: 'Press a key or combination, e.g. Control+A',
    input: input<{ key: string }>({ key: text }, ['key']),
    describe: (a) => `press ${a.key}`,
    builtin: { verbs: ['press'], examples: ['press Enter', 'press Control+A'] },
    run: async (a, c) => noted(await pressKeys(c.page, a.key, c.timeoutMs)),
  }),
  scroll: browser({
    tool: 'scroll',
    description: 'Scroll the page or the scrollable [index]',
    input: input<{ direction: ScrollDirection; index?: number }>({ direction: { type: 'string', enum: ['down', 'up', 'bottom', 'top'] }, index }, ['direction']),
    describe: (a) => `scroll ${a.direction}${a.index !== undefined ? ` [${a.index}]` : ''}`,
    builtin: { verbs: ['scroll'], examples: ['scroll down', 'scroll to the bottom', "scroll down the panel 'Messages'"] },
    run: async (a, c) => {
      if (a.index !== undefined) return noted(await scrollWithin(c.page, a.index, a.direction, c.timeoutMs));
      const moved = await c.page.evaluate((d) => {
        const was = window.scrollY;
        if (d === 'bottom') window.scrollTo(0, document.body.scrollHeight);
        else if (d === 'top') window.scrollTo(0, 0);
        else window.scrollBy(0, (d === 'down' ? 1 : -1) * window.innerHeight * 0.8);
        return window.scrollY !== was;
      }, a.direction);
      // A page whose content scrolls in boxes of its own never moves as a whole: say where to scroll instead.
      return moved ? {} : { note: `The page itself did not scroll (it is at its ${a.direction === 'down' || a.direction === 'bottom' ? 'bottom' : 'top'}); a box that scrolls on its own is scrolled by giving its [index] (marked "scrollable")` };
    },
  }),
  drag: browser({
    tool: 'drag',
    description: 'Drag [index] onto [to] or by dx/dy px',
    input: input<{ index: number; to?: number; dx?: number; dy?: number }>({ index, to: { type: 'integer' }, dx: { type: 'number' }, dy: { type: 'number' } }, ['index']),
    describe: (a) => `drag [${a.index}] ${a.to !== undefined ? `onto [${a.to}]` : `by ${a.dx ?? 0},${a.dy ?? 0} px`}`,
    builtin: { verbs: ['drag', 'move'], examples: ["drag 'Item' onto 'Other item'", "drag 'Handle' by 40 px right"] },
    run: async (a, c) => {
      await dragElement(c.page, a.index, a, c.timeoutMs);
      return {};
    },
  }),
  back: browser({
    tool: 'go_back',
    input: input({}),
    describe: () => 'go back',
    builtin: { verbs: ['go'], examples: ['go back'] },
    run: async (_a, c) => {
      await c.page.goBack({ waitUntil: 'load', timeout: c.timeoutMs });
      return {};
    },
  }),
  wait: browser({
    tool: 'wait',
    description: 'Wait for a text or seconds (max 10)',
    input: input<{ text?: string; seconds?: number }>({ text, seconds: { type: 'number' } }),
    describe: (a) => (a.text !== undefined ? `wait for ${JSON.stringify(a.text)}` : `wait ${a.seconds ?? 1}s`),
    builtin: { verbs: ['wait'], examples: ["wait for 'text'", 'wait 2 seconds'] },
    run: async (a, c) => {
      await waitOn(c.page, a, c.timeoutMs, c.signal);
      return {};
    },
  }),
  extract: browser<ExtractInput>({
    tool: 'extract',
    description:
      'Answer a "question" from the whole page (optional answer "schema"), or read "what" of [index], a selector or the page ("table": number or caption); long results go to disk',
    input: input<ExtractInput>({
      question: text,
      schema: { type: 'object' },
      what: { enum: ['title', 'heading', 'text', 'links', 'table', 'url', 'markdown'] satisfies ExtractWhat[] },
      index,
      selector: text,
      table: { type: ['integer', 'string'] },
    }),
    describe: (a) =>
      a.question !== undefined
        ? `extract ${JSON.stringify(short(a.question, 80))}`
        : `extract ${a.what ?? 'text'}${a.table !== undefined ? ` ${JSON.stringify(a.table)}` : ''}${a.index !== undefined ? ` of [${a.index}]` : a.selector ? ` of ${a.selector}` : ''}`,
    builtin: {
      verbs: ['extract', 'get', 'read', 'return', 'report', 'tell', 'give', 'show', 'list', 'what', "what's", 'which', 'download', 'copy'],
      examples: ['extract the title', 'extract the heading', "extract the text of '#main'", 'extract the links', 'extract the page as markdown', 'extract the table', 'extract the second table', "extract the table 'Prices'"],
    },
    run: async (a, c) => {
      const scope = { page: c.page, element: a.index !== undefined ? await element(c.page, a.index) : undefined };
      const r = await extract(scope, a, c.ask)
        .catch(reportable)
        .finally(() => scope.element?.dispose().catch(() => undefined));
      return { output: await deliverExtract(r.text, r.kind, c.diskDir) };
    },
  }),
  find_text: browser({
    tool: 'find_text',
    description: 'Find a text, scroll to it, say where it is',
    input: input<{ text: string }>({ text }, ['text']),
    describe: (a) => `find ${JSON.stringify(short(a.text, 60))}`,
    builtin: { verbs: ['find', 'look', 'locate', 'is', 'does'], examples: ["find 'text'", "is 'text' on the page"] },
    run: async (a, c) => ({ output: await findText(c.page, a.text).catch(reportable) }),
  }),
  switch_tab: browser({
    tool: 'switch_tab',
    input: input<{ tab: number }>({ tab: { type: 'integer' } }, ['tab']),
    describe: (a) => `switch to tab ${a.tab}`,
    builtin: { verbs: ['switch'], examples: ['switch to tab 2'] },
    run: async (a, c) => {
      const target = (await c.browser.pages()).filter((p) => !p.isClosed())[a.tab];
      if (!target) throw new ActionError(`There is no tab ${a.tab}`);
      await target.bringToFront();
      return { page: target };
    },
  }),
  upload: browser({
    tool: 'upload',
    description: 'Put a disk file in a file input',
    input: input<{ index: number; path: string }>({ index, path: text }, ['index', 'path']),
    describe: (a) => `upload ${a.path} into [${a.index}]`,
    builtin: { verbs: ['upload'], examples: ["upload 'file.txt' into 'Field'"] },
    run: async (a, c) => {
      await uploadFile(c.page, a.index, c.diskDir, a.path);
      return {};
    },
  }),
  read_download: browser({
    tool: 'read_download',
    description: 'Read a downloaded file by its listed name (CSV as a table, JSON, PDF, text)',
    input: input<{ file: string }>({ file: text }, ['file']),
    describe: (a) => `read download ${JSON.stringify(short(a.file, 80))}`,
    builtin: { verbs: ['read', 'open', 'download'], examples: ["read the downloaded file 'report.csv'", 'read the downloaded file'] },
    run: async (a, c) => {
      if (!c.downloads) throw new ActionError("This run cannot see the browser's downloads");
      const r = await c.downloads.read(a.file);
      return { output: await deliverExtract(r.text, r.kind, c.diskDir) };
    },
  }),
  shell: code({
    tool: 'shell',
    description: "Run one bash command in the run's disk directory; returns its output and exit code",
    input: input<{ command: string }>({ command: text }, ['command']),
    describe: (a) => `run ${short(a.command, 80)}`,
    builtin: { verbs: ['run', 'execute', 'exec'], examples: ['run `command`'] },
    run: (a, c) => runShellTool(a.command, c),
  }),
  write_file: code({
    tool: 'write_file',
    description: "Write a text file on the run's disk (relative path; replaces it)",
    input: input<{ path: string; content: string }>({ path: text, content: text }, ['path', 'content']),
    describe: (a) => `write ${a.path}`,
    builtin: { verbs: ['write', 'save', 'store', 'put'], examples: ["write 'text' to file.txt", 'save the result to out.json'] },
    run: (a, c) => writeDiskFile(c.diskDir, a.path, a.content),
  }),
  read_file: code({
    tool: 'read_file',
    description: "Read a text file of the run's disk",
    input: input<{ path: string }>({ path: text }, ['path']),
    describe: (a) => `read ${a.path}`,
    builtin: { verbs: ['read', 'print', 'cat', 'open', 'show'], examples: ['read file input.json'] },
    run: (a, c) => readDiskFile(c.diskDir, a.path),
  }),
  list_files: code({
    tool: 'list_files',
    description: "List the files of the run's disk with their sizes",
    input: input({}),
    describe: () => 'list files',
    builtin: { verbs: ['list', 'show'], examples: ['list files'] },
    run: (_a, c) => listDiskFiles(c.diskDir),
  }),
  done: {
    kind: 'answer',
    tool: 'done',
    input: input<{ result: string }>({ result: text }, ['result']),
    describe: () => 'done',
    builtin: { verbs: ['answer', 'reply', 'respond', 'say'], examples: ["answer 'text'"] },
  } satisfies AnswerSpec<{ result: string }>,
};

type Table = typeof ACTIONS;
export type ActionName = keyof Table;
type InputOf<S> = S extends { input: InputSchema<infer I> } ? I : never;

/** An action as a model decided it: its name and its input. */
export type Action = { [N in ActionName]: { name: N } & InputOf<Table[N]> }[ActionName];
/** Actions that work on the run's disk and terminal rather than in a browser. */
export type CodeAction = Extract<Action, { name: { [N in ActionName]: Table[N]['kind'] extends 'code' ? N : never }[ActionName] }>;

/** Every action's spec, by name (the table, seen through one type). */
export type ActionSpec = Common<any> & { kind: 'browser' | 'code' | 'answer'; run?: (a: any, c: any) => Promise<BrowserOutcome | ToolOutcome> };
export const SPECS = ACTIONS as unknown as Record<ActionName, ActionSpec>;

export function isCodeAction(a: Action): a is CodeAction {
  return SPECS[a.name].kind === 'code';
}

/** One line describing an action, as stored in a step's `action`. */
export function describeAction(a: Action): string {
  return SPECS[a.name].describe(a);
}

/** Carries out a browser action (not a code action or done); failures the agent can report are ActionErrors. */
export function runBrowserAction(a: Action, c: BrowserActionContext): Promise<BrowserOutcome> {
  const spec = SPECS[a.name];
  if (spec.kind !== 'browser') throw new ActionError(`${a.name} is not a browser action`);
  return spec.run!(a, c) as Promise<BrowserOutcome>;
}

/** Carries out a code action on the run's disk and terminal. */
export function runCodeAction(a: CodeAction, c: CodeToolContext): Promise<ToolOutcome> {
  return SPECS[a.name].run!(a, c) as Promise<ToolOutcome>;
}
