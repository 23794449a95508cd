/**
 * The `builtin` model: a deterministic interpreter of explicit instructions, one per sentence or
 * line ("Open URL. Type 'Ada' into 'Name'. Click 'Submit'. Extract the table."; for browsercode
 * also "Run `cmd`. Save the result to out.json. Read file notes.txt."). It needs no provider.
 * An instruction it cannot parse fails the run before any action, quoting it.
 */
import type { Action, ExtractWhat, ScrollDirection } from './actions.js';
import { ElementNotFound, ModelError, NeedsBrowser, turnResult, type AgentModel, type DecideInput, type Decision, type PageElement, type Toolset } from './model.js';

type Intent =
  | { kind: 'navigate'; url: string }
  | { kind: 'click'; target: string; hint?: string }
  | { kind: 'type'; value: string; target: string; submit: boolean }
  | { kind: 'select'; value: string; target: string }
  | { kind: 'press'; key: string }
  | { kind: 'scroll'; direction: ScrollDirection }
  | { kind: 'back' }
  | { kind: 'wait'; text?: string; seconds?: number }
  | { kind: 'extract'; what: ExtractWhat; target?: string }
  | { kind: 'upload'; file: string; target: string }
  | { kind: 'tab'; tab: number }
  | { kind: 'answer'; text: string }
  | { kind: 'shell'; command: string }
  | { kind: 'write'; path: string; content: string }
  | { kind: 'save'; path: string }
  | { kind: 'read_file'; path: string }
  | { kind: 'list_files' };

const CODE_INTENTS: Intent['kind'][] = ['shell', 'write', 'save', 'read_file', 'list_files'];

export interface Instruction {
  source: string;
  intent: Intent;
}

const OPEN = '[\'"“‘`]';
const CLOSE = '[\'"”’`]';
/** A quoted value, or bare words. */
const Q = `(?:${OPEN}(.+?)${CLOSE}|(.+?))`;

/** Splits a task into instructions: lines, then sentences (quotes are respected). */
export function splitInstructions(task: string): string[] {
  const out: string[] = [];
  for (const line of task.split(/\r?\n/)) {
    let cur = '';
    let quote: string | null = null;
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      const prev = line[i - 1] ?? ' ';
      const nextc = line[i + 1] ?? ' ';
      cur += c;
      if (quote) {
        if ((c === quote || (quote === '“' && c === '”') || (quote === '‘' && c === '’')) && /[\s.,;:!?)]/.test(nextc)) quote = null;
      } else if (/['"“‘`]/.test(c) && /[\s(:]/.test(prev)) {
        quote = c;
      } else if (/[.!?;]/.test(c) && /\s/.test(nextc) && !/^\s*\d+[.)]$/.test(cur)) {
        out.push(cur);
        cur = '';
      }
    }
    out.push(cur);
  }
  return out
    .map((s) => s.trim().replace(/^(?:\d+[.)]|[-*•])\s+/, '').replace(/^(?:and\s+)?then,?\s+/i, '').replace(/^(?:and|finally|next),?\s+/i, '').replace(/[.!;]+$/, '').trim())
    .filter((s) => s.length > 0);
}

const pick = (m: RegExpMatchArray, i: number) => (m[i] ?? m[i + 1] ?? '').trim();
/** A file path, quoted or not: one word with a dot or a slash in it (out.json, data/a.csv), so a form field's name is never taken for one. */
const PATH = `(?:${OPEN}([^'"“”‘’\`]*[./][^'"“”‘’\`]*)${CLOSE}|([\\w.-]*[./][\\w./-]*\\w))`;
const pathOf = (m: RegExpMatchArray, i: number) => (m[i] ?? m[i + 1] ?? '').trim();
const KEYS: Record<string, string> = { enter: 'Enter', return: 'Enter', tab: 'Tab', escape: 'Escape', esc: 'Escape', space: 'Space', backspace: 'Backspace', 'arrow down': 'ArrowDown', 'arrow up': 'ArrowUp', 'down arrow': 'ArrowDown', 'up arrow': 'ArrowUp', pagedown: 'PageDown', 'page down': 'PageDown', pageup: 'PageUp', 'page up': 'PageUp' };
const EXTRACT_VERB = '(?:extract|get|read|return|report|tell me|find|give me|what is|what\'s|copy)';

/** One instruction → an intent, or undefined when it is not understood. */
export function parseInstruction(s: string): Intent | undefined {
  let m: RegExpMatchArray | null;
  const t = s.trim();
  // Terminal and files (browsercode). A command is always in backticks, so it may hold anything.
  if ((m = t.match(/^(?:run|execute|exec)\s+(?:the\s+)?(?:command\s+|shell\s+command\s+|script\s+)?`([^`]+)`$/i))) return { kind: 'shell', command: m[1]! };
  if ((m = t.match(/^(?:run|execute)\s+(?:the\s+)?(?:command|shell command)\s*:\s*(.+)$/i))) return { kind: 'shell', command: m[1]! };
  if ((m = t.match(new RegExp(`^(?:write|save|put)\\s+${OPEN}([\\s\\S]*?)${CLOSE}\\s+(?:to|into|in|as)\\s+(?:the\\s+)?(?:file\\s+)?${PATH}$`, 'i')))) return { kind: 'write', content: m[1]!, path: pathOf(m, 2) };
  if ((m = t.match(new RegExp(`^(?:save|write|store|put)\\s+(?:the\\s+|that\\s+|this\\s+|it\\b)?(?:result|results|answer|output|extracted\\s+\\w+|table|links|text|title|heading|data|it|that|this)?\\s*(?:as\\s+json\\s+)?(?:to|into|in|as)\\s+(?:the\\s+|a\\s+)?(?:file\\s+)?${PATH}$`, 'i')))) return { kind: 'save', path: pathOf(m, 1) };
  if ((m = t.match(new RegExp(`^(?:read|show|print|cat|open)\\s+(?:the\\s+)?file\\s+${PATH}$`, 'i')))) return { kind: 'read_file', path: pathOf(m, 1) };
  if (/^(?:list|show)\s+(?:all\s+)?(?:the\s+)?files(?:\s+on\s+the\s+disk)?$/i.test(t)) return { kind: 'list_files' };
  if ((m = t.match(/^(?:open|go to|navigate to|visit|load|browse to)\s+(?:the\s+)?(?:page\s+|url\s+|website\s+|site\s+)?[<'"“‘`]?([a-z][a-z0-9+.-]*:\/\/\S+?|[\w-]+(?:\.[\w-]+)+(?:[:/]\S*)?)[>'"”’`]?$/i))) return { kind: 'navigate', url: m[1]! };
  if ((m = t.match(new RegExp(`^(?:click|press|tap|hit)(?:\\s+on)?\\s+(?:the\\s+)?(?:(link|button|tab|checkbox)\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+(link|button|tab|checkbox))?$`, 'i')))) return { kind: 'click', target: m[2]!.trim(), hint: (m[1] ?? m[3])?.toLowerCase() };
  if ((m = t.match(/^(?:click|tap)(?:\s+on)?\s+(?:the\s+)?(.+?)(?:\s+(link|button|tab|checkbox))?$/i))) return { kind: 'click', target: m[1]!.trim(), hint: m[2]?.toLowerCase() };
  if ((m = t.match(/^press\s+(?:the\s+)?([a-z ]+?)(?:\s+key)?$/i)) && KEYS[m[1]!.toLowerCase()]) return { kind: 'press', key: KEYS[m[1]!.toLowerCase()]! };
  if ((m = t.match(new RegExp(`^(?:type|enter|write|input|put)\\s+${Q}\\s+(?:into|in|on)\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|box|input|textbox|area))?(\\s+and\\s+(?:submit|press enter))?$`, 'i'))))
    return { kind: 'type', value: pick(m, 1), target: pick(m, 3), submit: Boolean(m[5]) };
  if ((m = t.match(new RegExp(`^fill(?:\\s+in|\\s+out)?\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|box|input))?\\s+with\\s+${Q}$`, 'i')))) return { kind: 'type', value: pick(m, 3), target: pick(m, 1), submit: false };
  if ((m = t.match(new RegExp(`^(?:select|choose|pick)\\s+${Q}\\s+(?:from|in|for)\\s+(?:the\\s+)?${Q}(?:\\s+(?:dropdown|menu|list|field|select))?$`, 'i')))) return { kind: 'select', value: pick(m, 1), target: pick(m, 3) };
  if ((m = t.match(/^scroll\s+(down|up)(?:\s+to\s+the\s+(bottom|top))?$/i))) return { kind: 'scroll', direction: (m[2] ?? m[1])!.toLowerCase() as ScrollDirection };
  if ((m = t.match(/^scroll\s+to\s+the\s+(bottom|top)(?:\s+of the page)?$/i))) return { kind: 'scroll', direction: m[1]!.toLowerCase() as ScrollDirection };
  if (/^go\s+back$/i.test(t)) return { kind: 'back' };
  if ((m = t.match(/^wait\s+(?:for\s+)?(\d+(?:\.\d+)?)\s+seconds?$/i))) return { kind: 'wait', seconds: Number(m[1]) };
  if ((m = t.match(new RegExp(`^wait\\s+(?:for|until)\\s+(?:the\\s+text\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+(?:appears|is shown|shows up|to appear))?$`, 'i')))) return { kind: 'wait', text: m[1]! };
  if ((m = t.match(new RegExp(`^upload\\s+${Q}\\s+(?:into|to|in|using)\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|input))?$`, 'i')))) return { kind: 'upload', file: pick(m, 1), target: pick(m, 3) };
  if ((m = t.match(/^(?:switch|go)\s+to\s+tab\s+(\d+)$/i))) return { kind: 'tab', tab: Number(m[1]) - 1 };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:page(?:'s)?\\s+)?title(?:\\s+of\\s+the\\s+page)?$`, 'i')))) return { kind: 'extract', what: 'title' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:first\\s+|main\\s+|page\\s+)?heading$`, 'i')))) return { kind: 'extract', what: 'heading' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:current\\s+|page\\s+)?url$`, 'i')))) return { kind: 'extract', what: 'url' };
  if ((m = t.match(new RegExp(`^(?:${EXTRACT_VERB}|list)\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?links(?:\\s+on\\s+the\\s+page)?(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'links' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:first\\s+)?table(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'table' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?text\\s+(?:of|in)\\s+(?:the\\s+)?(?:element\\s+)?${Q}$`, 'i')))) return { kind: 'extract', what: 'text', target: pick(m, 1) };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?(?:page\\s+)?text$`, 'i')))) return { kind: 'extract', what: 'text' };
  if ((m = t.match(new RegExp(`^(?:answer|reply|respond|say)\\s+(?:with\\s+)?${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'answer', text: m[1]! };
  return undefined;
}

const UNDERSTOOD = "open <url>; click 'Text'; type 'value' into 'Field'; select 'Option' from 'Field'; press Enter; scroll down; wait for 'text'; upload 'file' into 'Field'; extract the title, heading, text of 'selector', links or table; answer 'text'";
const UNDERSTOOD_CODE = "; run `command`; write 'text' to file.txt; save the result to out.json; read file notes.txt; list files";

/** Parses a whole task; throws ModelError quoting the first instruction it cannot follow. */
export function parseTask(task: string, toolset: Toolset = 'browser'): Instruction[] {
  const steps = splitInstructions(task);
  if (!steps.length) throw new ModelError('The builtin model needs at least one instruction');
  return steps.map((source) => {
    const intent = parseInstruction(source);
    if (!intent) throw new ModelError(`The builtin model cannot follow this step: "${source}". It understands explicit instructions such as: ${UNDERSTOOD}${toolset === 'code' ? UNDERSTOOD_CODE : ''}.`);
    if (toolset === 'browser' && CODE_INTENTS.includes(intent.kind)) throw new ModelError(`"${source}" needs a terminal or files, which browser-agent does not have; use the browsercode agent`);
    return { source, intent };
  });
}

const norm = (s: string) => s.toLowerCase().replace(/\s+/g, ' ').replace(/[:*]\s*$/, '').trim();

/** The element `target` names: by id (`#id`), then exact, prefix and substring matches of its texts. */
export function findElement(elements: PageElement[], target: string, want: 'field' | 'click' | 'file', hint?: string): PageElement | undefined {
  if (target.startsWith('#')) return elements.find((e) => e.id === target.slice(1));
  const t = norm(target);
  const fieldTags = ['input', 'textarea', 'select'];
  let pool = elements;
  if (want === 'field') pool = elements.filter((e) => fieldTags.includes(e.tag) || e.role === 'textbox');
  if (want === 'file') pool = elements.filter((e) => e.tag === 'input' && e.type === 'file');
  if (want === 'click' && hint === 'link') pool = elements.filter((e) => e.tag === 'a') ;
  if (want === 'click' && hint === 'button') pool = elements.filter((e) => e.tag === 'button' || e.role === 'button' || (e.tag === 'input' && ['submit', 'button'].includes(e.type)));
  const keys = (e: PageElement) => (want === 'click' ? [e.text, e.label, e.name, e.id] : [e.label, e.placeholder, e.name, e.id, e.text]).filter(Boolean).map(norm);
  return pool.find((e) => keys(e).includes(t)) ?? pool.find((e) => keys(e).some((k) => k.startsWith(t))) ?? pool.find((e) => keys(e).some((k) => k.includes(t)));
}

export class BuiltinModel implements AgentModel {
  readonly name = 'builtin';
  readonly #instructions: Instruction[];
  #next = 0;

  constructor(task: string, toolset: Toolset = 'browser') {
    this.#instructions = parseTask(task, toolset);
  }

  /** The answer: an explicit `answer`, else what was extracted (one per line), else "Done". */
  #result(input: DecideInput): string {
    return turnResult('', input.history);
  }

  async decide(input: DecideInput, _signal?: AbortSignal): Promise<Decision> {
    const instr = this.#instructions[this.#next];
    if (!instr) return { thought: 'All instructions are done', action: { name: 'done', result: this.#result(input) } };
    const { intent, source } = instr;
    const page = () => {
      if (!input.observation) throw new NeedsBrowser();
      return input.observation;
    };
    const need = (target: string, want: 'field' | 'click' | 'file', hint?: string) => {
      const o = page();
      const el = findElement(o.elements, target, want, hint);
      if (!el) throw new ElementNotFound(target, o.url);
      return el.index;
    };
    let action: Action;
    switch (intent.kind) {
      case 'navigate':
        action = { name: 'navigate', url: intent.url };
        break;
      case 'click':
        action = { name: 'click', index: need(intent.target, 'click', intent.hint) };
        break;
      case 'type':
        action = { name: 'type', index: need(intent.target, 'field'), text: intent.value, submit: intent.submit };
        break;
      case 'select':
        action = { name: 'select', index: need(intent.target, 'field'), option: intent.value };
        break;
      case 'press':
        page();
        action = { name: 'press', key: intent.key };
        break;
      case 'scroll':
        page();
        action = { name: 'scroll', direction: intent.direction };
        break;
      case 'back':
        page();
        action = { name: 'back' };
        break;
      case 'wait':
        page();
        action = { name: 'wait', ...(intent.text !== undefined ? { text: intent.text } : { seconds: intent.seconds ?? 1 }) };
        break;
      case 'extract': {
        const o = page();
        if (intent.target && /^[#.[]|^[a-z][a-z0-9]*$/i.test(intent.target) && !o.elements.some((e) => norm(e.text) === norm(intent.target!))) {
          action = { name: 'extract', what: intent.what, selector: intent.target };
        } else if (intent.target) {
          action = { name: 'extract', what: intent.what, index: need(intent.target, 'click') };
        } else {
          action = { name: 'extract', what: intent.what };
        }
        break;
      }
      case 'upload': {
        if (!input.diskFiles.includes(intent.file)) throw new ModelError(`There is no file ${JSON.stringify(intent.file)} on the run's disk (attach it with attached_file_ids)`);
        action = { name: 'upload', index: need(intent.target, 'file'), path: intent.file };
        break;
      }
      case 'tab':
        page();
        action = { name: 'switch_tab', tab: intent.tab };
        break;
      case 'shell':
        action = { name: 'shell', command: intent.command };
        break;
      case 'write':
        action = { name: 'write_file', path: intent.path, content: intent.content };
        break;
      case 'save': {
        // What the run found so far: the last extraction (or command output, file read).
        const found = input.history.filter((h) => h.extracted !== undefined && h.action.name !== 'write_file');
        if (!found.length) throw new ModelError(`"${source}": there is nothing to save yet (extract something or run a command first)`);
        const last = found[found.length - 1]!.extracted!;
        action = { name: 'write_file', path: intent.path, content: last.endsWith('\n') ? last : `${last}\n` };
        break;
      }
      case 'read_file':
        action = { name: 'read_file', path: intent.path };
        break;
      case 'list_files':
        action = { name: 'list_files' };
        break;
      case 'answer':
        this.#next++;
        return { thought: source, action: { name: 'done', result: intent.text } };
    }
    this.#next++;
    return { thought: source, action };
  }
}
