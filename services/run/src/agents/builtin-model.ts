/**
 * The `builtin` model: a deterministic interpreter of explicit instructions, one per sentence or
 * line ("Open URL. Type 'Ada' into 'Name'. Click 'Submit'. Extract the table."; for browsercode
 * also "Run `cmd`. Save the result to out.json. Read file notes.txt."). It needs no provider.
 * An instruction it cannot parse fails the run before any action, quoting it.
 */
import { SPECS, type Action, type ActionSpec, type ExtractWhat, type ScrollDirection } from './actions.js';
import { savedExtractPath } from './page-extract.js';
import { ElementNotFound, ModelError, NeedsBrowser, turnResult, type AgentModel, type DecideInput, type Decision, type PageElement, type Toolset } from './model.js';

type Intent =
  | { kind: 'navigate'; url: string }
  | { kind: 'click'; target: string; hint?: string }
  | { kind: 'click_nth'; nth: number; of: 'link' | 'result' }
  | { kind: 'type'; value: string; target: string; submit: boolean }
  | { kind: 'select'; value: string; target: string }
  | { kind: 'search'; value: string }
  | { kind: 'press'; key: string }
  | { kind: 'scroll'; direction: ScrollDirection; target?: string }
  | { kind: 'drag'; target: string; onto?: string; dx?: number; dy?: number }
  | { kind: 'back' }
  | { kind: 'wait'; text?: string; seconds?: number }
  | { kind: 'extract'; what: ExtractWhat; target?: string; table?: number | string }
  | { kind: 'find_text'; text: string }
  | { kind: 'keep'; field: string; value: string }
  | { kind: 'upload'; file: string; target: string }
  | { kind: 'tab'; tab: number }
  | { kind: 'read_download'; name?: string }
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

/** The quote that `c` opens, when it opens one here (after a space, a bracket or a colon). */
const opensQuote = (c: string, prev: string) => /['"“‘`]/.test(c) && /[\s(:]/.test(prev);
const closesQuote = (quote: string, c: string, next: string) => (c === quote || (quote === '“' && c === '”') || (quote === '‘' && c === '’')) && /[\s.,;:!?)]/.test(next);

/** For each character of `s`, whether it is outside quotes and backticks. */
function unquoted(s: string): boolean[] {
  const out: boolean[] = [];
  let quote: string | null = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quote) {
      out.push(false);
      if (closesQuote(quote, c, s[i + 1] ?? ' ')) quote = null;
    } else if (opensQuote(c, s[i - 1] ?? ' ')) {
      out.push(false);
      quote = c;
    } else {
      out.push(true);
    }
  }
  return out;
}

/** Words that begin an instruction (from the table of actions, and the builtin's own "keep"): a clause joined by "and", "then" or a comma starts with one of them. */
const VERBS = new Set([...Object.values(SPECS).flatMap((s) => s.builtin?.verbs ?? []), 'keep', 'filter']);
const CLAUSE_JOIN = /^(?:\s*,\s*(?:and\s+then\s+|and\s+|then\s+)?|\s+and\s+then\s+|\s+then\s+|\s+and\s+)/i;

/** Splits one sentence at ", ", " and ", " then " where the next words begin an instruction (never inside quotes or a URL). */
export function splitClauses(sentence: string, atAnyWord = false): string[] {
  const free = unquoted(sentence);
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < sentence.length; i++) {
    if (!free[i] || !/[\s,]/.test(sentence[i]!)) continue;
    const m = sentence.slice(i).match(CLAUSE_JOIN);
    if (!m) continue;
    const rest = sentence.slice(i + m[0].length);
    const word = rest.match(/^(?:please\s+)?([a-z']+)/i)?.[1]?.toLowerCase();
    if (!word || (!atAnyWord && !VERBS.has(word)) || !free[i + m[0].length]) continue;
    out.push(sentence.slice(start, i));
    start = i + m[0].length;
    i = start - 1;
  }
  out.push(sentence.slice(start));
  return out;
}

/** Splits a task into instructions: lines, then sentences, then clauses joined by "and", "then" or commas (quotes and URLs stay whole). */
export function splitInstructions(task: string): string[] {
  const sentences: string[] = [];
  for (const line of task.split(/\r?\n/)) {
    const free = unquoted(line);
    let cur = '';
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      cur += c;
      if (free[i] && /[.!?;]/.test(c) && /\s/.test(line[i + 1] ?? ' ') && !/^\s*\d+[.)]$/.test(cur)) {
        sentences.push(cur);
        cur = '';
      }
    }
    sentences.push(cur);
  }
  const tidy = (s: string) =>
    s.trim().replace(/^(?:\d+[.)]|[-*•])\s+/, '').replace(/^(?:and\s+)?then,?\s+/i, '').replace(/^(?:and|finally|next|also|first|please),?\s+/i, '').replace(/^(?:can|could|would) you\s+/i, '').replace(/[.!;?]+$/, '').replace(/,?\s+please$/i, '').trim();
  return sentences
    .map(tidy)
    .flatMap((s) => splitClauses(s))
    .map(tidy)
    .filter((s) => s.length > 0);
}

const pick = (m: RegExpMatchArray, i: number) => (m[i] ?? m[i + 1] ?? '').trim();
/** A file path, quoted or not: one word with a dot or a slash in it (out.json, data/a.csv), so a form field's name is never taken for one. */
const PATH = `(?:${OPEN}([^'"“”‘’\`]*[./][^'"“”‘’\`]*)${CLOSE}|([\\w.-]*[./][\\w./-]*\\w))`;
const pathOf = (m: RegExpMatchArray, i: number) => (m[i] ?? m[i + 1] ?? '').trim();
const KEYS: Record<string, string> = { enter: 'Enter', return: 'Enter', tab: 'Tab', escape: 'Escape', esc: 'Escape', space: 'Space', backspace: 'Backspace', 'arrow down': 'ArrowDown', 'arrow up': 'ArrowUp', 'down arrow': 'ArrowDown', 'up arrow': 'ArrowUp', pagedown: 'PageDown', 'page down': 'PageDown', pageup: 'PageUp', 'page up': 'PageUp' };
const EXTRACT_VERB = '(?:extract|get|read|return|report|tell me|find|give me|show me|what is|what are|what\'s|which is|download|copy)';
const ORDINALS: Record<string, number> = { first: 1, second: 2, third: 3, fourth: 4, fifth: 5, sixth: 6, seventh: 7, eighth: 8, ninth: 9, tenth: 10, last: -1 };
const ORDINAL = '(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|\\d+(?:st|nd|rd|th))';
const ordinal = (w: string) => ORDINALS[w.toLowerCase()] ?? parseInt(w, 10);
/** A web address written in a task: with a scheme, or a bare host with a dot (example.com/path). */
const URL_RE = '[<\'"“‘`]?([a-z][a-z0-9+.-]*:\\/\\/\\S+?|(?:www\\.)?[\\w-]+(?:\\.[\\w-]+)*\\.[a-z]{2,}(?::\\d+)?(?:\\/\\S*)?|localhost(?::\\d+)?(?:\\/\\S*)?)[>\'"”’`]?'

/** One instruction → an intent, or undefined when it is not understood. */
export function parseInstruction(s: string): Intent | undefined {
  let m: RegExpMatchArray | null;
  const t = s.trim();
  // Terminal and files (browsercode). A command is always in backticks, so it may hold anything.
  if ((m = t.match(/^(?:run|execute|exec)\s+(?:the\s+)?(?:command\s+|shell\s+command\s+|script\s+)?`([^`]+)`$/i))) return { kind: 'shell', command: m[1]! };
  if ((m = t.match(/^(?:run|execute)\s+(?:the\s+)?(?:command|shell command)\s*:\s*(.+)$/i))) return { kind: 'shell', command: m[1]! };
  if ((m = t.match(new RegExp(`^(?:write|save|put)\\s+${OPEN}([\\s\\S]*?)${CLOSE}\\s+(?:to|into|in|as)\\s+(?:the\\s+)?(?:file\\s+)?${PATH}$`, 'i')))) return { kind: 'write', content: m[1]!, path: pathOf(m, 2) };
  if ((m = t.match(new RegExp(`^(?:save|write|store|put)\\s+(?:the\\s+|that\\s+|this\\s+|it\\b)?(?:result|results|answer|output|extracted\\s+\\w+|table|links|text|title|heading|data|entries|rows|it|that|this|them|these|those)?\\s*(?:as\\s+json\\s+)?(?:to|into|in|as)\\s+(?:the\\s+|a\\s+)?(?:file\\s+)?${PATH}$`, 'i')))) return { kind: 'save', path: pathOf(m, 1) };
  if ((m = t.match(new RegExp(`^(?:read|show|print|cat|open)\\s+(?:the\\s+)?file\\s+${PATH}$`, 'i')))) return { kind: 'read_file', path: pathOf(m, 1) };
  if ((m = t.match(new RegExp(`^(?:read|load|open)\\s+(?:the\\s+)?(?:file\\s+)?${PATH}\\s+(?:from|on)\\s+(?:the\\s+)?disk$`, 'i')))) return { kind: 'read_file', path: pathOf(m, 1) };
  if (/^(?:list|show)\s+(?:all\s+)?(?:the\s+)?files(?:\s+on\s+the\s+disk)?$/i.test(t)) return { kind: 'list_files' };
  // Files the browser downloaded: named, or (no name) the latest.
  if (/^(?:read|open|show(?:\s+me)?)\s+(?:the\s+)?(?:downloaded\s+file|download|file\s+(?:that\s+was\s+|you\s+)?downloaded|file\s+you\s+just\s+downloaded)$/i.test(t)) return { kind: 'read_download' };
  if ((m = t.match(new RegExp(`^(?:read|open|show(?:\\s+me)?)\\s+(?:the\\s+)?(?:downloaded\\s+file|download(?:ed)?(?:\\s+file)?|file\\s+(?:that\\s+was\\s+|you\\s+)?downloaded)\\s+${Q}$`, 'i')))) return { kind: 'read_download', name: pick(m, 1) };
  if ((m = t.match(/^(?:open|go to|navigate to|visit|load|browse to)\s+(?:the\s+)?(?:page\s+|url\s+|website\s+|site\s+)?[<'"“‘`]?([a-z][a-z0-9+.-]*:\/\/\S+?|[\w-]+(?:\.[\w-]+)+(?:[:/]\S*)?)[>'"”’`]?$/i))) return { kind: 'navigate', url: m[1]! };
  if ((m = t.match(new RegExp(`^(?:click|tap|open|follow|visit|go\\s+to)(?:\\s+on)?\\s+the\\s+${ORDINAL}\\s+(?:search\\s+)?(link|result|hit)$`, 'i')))) return { kind: 'click_nth', nth: ordinal(m[1]!), of: m[2]!.toLowerCase() === 'link' ? 'link' : 'result' };
  if ((m = t.match(new RegExp(`^(?:go|navigate)\\s+to\\s+(?:the\\s+)?${Q}\\s+(?:page|section)$`, 'i')))) return { kind: 'click', target: pick(m, 1) };
  if ((m = t.match(new RegExp(`^(?:click|press|tap|hit)(?:\\s+on)?\\s+(?:the\\s+)?(?:(link|button|tab|checkbox)\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+(link|button|tab|checkbox))?$`, 'i')))) return { kind: 'click', target: m[2]!.trim(), hint: (m[1] ?? m[3])?.toLowerCase() };
  if ((m = t.match(/^(?:click|tap)(?:\s+on)?\s+(?:the\s+)?(.+?)(?:\s+(link|button|tab|checkbox))?$/i))) return { kind: 'click', target: m[1]!.trim(), hint: m[2]?.toLowerCase() };
  if ((m = t.match(/^press\s+(?:the\s+)?([a-z ]+?)(?:\s+key)?$/i)) && KEYS[m[1]!.toLowerCase()]) return { kind: 'press', key: KEYS[m[1]!.toLowerCase()]! };
  if ((m = t.match(/^press\s+(?:the\s+)?((?:ctrl|control|shift|alt|option|meta|cmd|command)(?:\s*\+\s*[\w-]+)+)(?:\s+keys?)?$/i))) return { kind: 'press', key: m[1]!.replace(/\s+/g, '') };
  if ((m = t.match(new RegExp(`^(?:type|enter|write|input|put)\\s+${Q}\\s+(?:into|in|on)\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|box|input|textbox|area))?(\\s+and\\s+(?:submit|press enter))?$`, 'i'))))
    return { kind: 'type', value: pick(m, 1), target: pick(m, 3), submit: Boolean(m[5]) };
  if ((m = t.match(new RegExp(`^search\\s+(?:the\\s+site\\s+)?(?:for\\s+)?${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'search', value: m[1]! };
  if ((m = t.match(new RegExp(`^fill(?:\\s+in|\\s+out)?\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|box|input))?\\s+with\\s+${Q}$`, 'i')))) return { kind: 'type', value: pick(m, 3), target: pick(m, 1), submit: false };
  if ((m = t.match(new RegExp(`^(?:select|choose|pick)\\s+${Q}\\s+(?:from|in|for)\\s+(?:the\\s+)?${Q}(?:\\s+(?:dropdown|menu|list|field|select))?$`, 'i')))) return { kind: 'select', value: pick(m, 1), target: pick(m, 3) };
  // A scroll container, named: "scroll down the panel 'Messages'", "scroll the feed 'News' to the bottom", "scroll to the bottom of 'Chat'".
  const PANEL = `(?:the\\s+)?(?:(?:panel|pane|list|feed|box|section|sidebar|container|area|region|chat|table)\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+(?:panel|pane|list|feed|box|section|sidebar|container|area|region|chat|table))?`;
  if ((m = t.match(new RegExp(`^scroll\\s+(down|up)(?:\\s+to\\s+the\\s+(bottom|top))?\\s+(?:in\\s+|inside\\s+|of\\s+|within\\s+)?${PANEL}$`, 'i')))) return { kind: 'scroll', direction: (m[2] ?? m[1])!.toLowerCase() as ScrollDirection, target: m[3]! };
  if ((m = t.match(new RegExp(`^scroll\\s+${PANEL}(?:\\s+(?:(down|up)|to\\s+(?:the\\s+|its\\s+)?(bottom|top)))?$`, 'i')))) return { kind: 'scroll', direction: (m[2] ?? m[3] ?? 'down').toLowerCase() as ScrollDirection, target: m[1]! };
  if ((m = t.match(new RegExp(`^scroll\\s+to\\s+the\\s+(bottom|top)\\s+of\\s+${PANEL}$`, 'i')))) return { kind: 'scroll', direction: m[1]!.toLowerCase() as ScrollDirection, target: m[2]! };
  // Drag and drop: "drag 'A' onto 'B'"; a slider by pixels: "drag 'Volume' 60 px right".
  if ((m = t.match(new RegExp(`^(?:drag|move)\\s+(?:the\\s+)?${OPEN}(.+?)${CLOSE}\\s+(?:onto|on\\s+to|to|on|over|before|above)\\s+(?:the\\s+)?${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'drag', target: m[1]!, onto: m[2]! };
  if ((m = t.match(new RegExp(`^drag\\s+(?:the\\s+)?${OPEN}(.+?)${CLOSE}\\s+(?:by\\s+)?(\\d+)\\s*(?:px|pixels?)\\s+(?:to\\s+the\\s+)?(right|left|up|down)$`, 'i')))) {
    const n = Number(m[2]);
    const dir = m[3]!.toLowerCase();
    return { kind: 'drag', target: m[1]!, ...(dir === 'right' || dir === 'left' ? { dx: dir === 'right' ? n : -n } : { dy: dir === 'down' ? n : -n }) };
  }
  // "Set the date field to 2025-03-14", "set 'Volume' to 40": the field takes the value as it accepts it.
  if ((m = t.match(new RegExp(`^(?:set|change)\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|input|slider|picker|box))?\\s+to\\s+${Q}$`, 'i')))) return { kind: 'type', value: pick(m, 3), target: pick(m, 1), submit: false };
  if ((m = t.match(/^scroll\s+(down|up)(?:\s+to\s+the\s+(bottom|top))?$/i))) return { kind: 'scroll', direction: (m[2] ?? m[1])!.toLowerCase() as ScrollDirection };
  if ((m = t.match(/^scroll\s+to\s+the\s+(bottom|top)(?:\s+of the page)?$/i))) return { kind: 'scroll', direction: m[1]!.toLowerCase() as ScrollDirection };
  if (/^go\s+back$/i.test(t)) return { kind: 'back' };
  if ((m = t.match(/^wait\s+(?:for\s+)?(\d+(?:\.\d+)?)\s+seconds?$/i))) return { kind: 'wait', seconds: Number(m[1]) };
  if ((m = t.match(new RegExp(`^wait\\s+(?:for|until)\\s+(?:the\\s+text\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+(?:appears|is shown|shows up|to appear))?$`, 'i')))) return { kind: 'wait', text: m[1]! };
  if ((m = t.match(new RegExp(`^upload\\s+${Q}\\s+(?:into|to|in|using)\\s+(?:the\\s+)?${Q}(?:\\s+(?:field|input))?$`, 'i')))) return { kind: 'upload', file: pick(m, 1), target: pick(m, 3) };
  if ((m = t.match(/^(?:switch|go)\s+to\s+tab\s+(\d+)$/i))) return { kind: 'tab', tab: Number(m[1]) - 1 };
  if ((m = t.match(new RegExp(`^(?:find|look\\s+for|locate|scroll\\s+to)\\s+(?:the\\s+)?(?:text\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+on\\s+the\\s+page)?$`, 'i')))) return { kind: 'find_text', text: m[1]! };
  if ((m = t.match(new RegExp(`^(?:is|does)\\s+(?:the\\s+text\\s+)?${OPEN}(.+?)${CLOSE}\\s+(?:on|in)\\s+the\\s+page$|^does\\s+the\\s+page\\s+(?:say|contain|mention)\\s+${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'find_text', text: (m[1] ?? m[2])! };
  if ((m = t.match(new RegExp(`^(?:keep|filter|keep\\s+only)\\s+(?:only\\s+)?(?:the\\s+)?(?:entries|rows|items|records|objects|ones)\\s+(?:with|where|whose)\\s+(?:the\\s+)?([\\w -]+?)\\s+(?:is\\s+|=\\s*|equal\\s+to\\s+)?${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'keep', field: m[1]!.trim(), value: m[2]! };
  if ((m = t.match(new RegExp(`^(?:${EXTRACT_VERB}|list)\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?(links|table|heading)\\s+(?:of|in|inside|within|under)\\s+(?:the\\s+)?(?:element\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: m[1]!.toLowerCase() as ExtractWhat, target: m[2]! };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?${ORDINAL}\\s+table(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'table', table: ordinal(m[1]!) };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?table\\s+(?:number\\s+)?(\\d+)(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'table', table: Number(m[1]) };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?table\\s+(?:named\\s+|called\\s+|titled\\s+|under\\s+)?${OPEN}(.+?)${CLOSE}(?:\\s+as\\s+json)?$|^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?${OPEN}(.+?)${CLOSE}\\s+table(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'table', table: (m[1] ?? m[2])! };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:page|text|content)\\s+as\\s+markdown$`, 'i')))) return { kind: 'extract', what: 'markdown' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:page(?:'s)?\\s+)?title(?:\\s+of\\s+the\\s+page)?$`, 'i')))) return { kind: 'extract', what: 'title' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:first\\s+|main\\s+|page\\s+)?heading$`, 'i')))) return { kind: 'extract', what: 'heading' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:current\\s+|page\\s+)?url$`, 'i')))) return { kind: 'extract', what: 'url' };
  if ((m = t.match(new RegExp(`^(?:${EXTRACT_VERB}|list)\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?links(?:\\s+on\\s+the\\s+page)?(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'links' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?(?:first\\s+)?table(?:\\s+as\\s+json)?$`, 'i')))) return { kind: 'extract', what: 'table' };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:the\\s+)?text\\s+(?:of|in)\\s+(?:the\\s+)?(?:element\\s+)?${Q}$`, 'i')))) return { kind: 'extract', what: 'text', target: pick(m, 1) };
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?(?:page\\s+)?text$`, 'i')))) return { kind: 'extract', what: 'text' };
  // "Return the plans as JSON: [shape]": the table of that name (a JSON shape after the colon is for LLMs; the builtin gives the rows).
  if ((m = t.match(new RegExp(`^${EXTRACT_VERB}\\s+(?:me\\s+)?(?:all\\s+)?(?:the\\s+)?([\\w][\\w -]*?)(?:\\s+table)?\\s+as\\s+json(?:\\s*:[\\s\\S]*)?$`, 'i')))) return { kind: 'extract', what: 'table', table: m[1]! };
  // "Download the March report": click what names it (the loop waits for the file).
  // Not "download the table on <url>" (a question about a page, see parseClause).
  if ((m = t.match(new RegExp(`^download\\s+(?:the\\s+)?(?:file\\s+|link\\s+)?${Q}$`, 'i'))) && (m[1] || (!/^(?:table|links?|heading|title|text|page|url)\b/i.test(m[2]!) && !new RegExp(URL_RE, 'i').test(m[2]!))))
    return { kind: 'click', target: pick(m, 1) };
  if ((m = t.match(new RegExp(`^(?:answer|reply|respond|say)\\s+(?:with\\s+)?${OPEN}(.+?)${CLOSE}$`, 'i')))) return { kind: 'answer', text: m[1]! };
  return undefined;
}

/** Words for the page the browser shows now: "the current page", "this page", "the page I'm on". */
const THIS_PAGE = String.raw`(?:the\s+|this\s+)?(?:current(?:ly\s+open)?\s+|open(?:ed)?\s+|present\s+|displayed\s+|shown\s+|same\s+)?page(?:\s+(?:that\s+)?(?:i'?m|i\s+am|we'?re|we\s+are|you'?re|you\s+are)\s+(?:on|at|looking\s+at|viewing)|\s+(?:that\s+)?is\s+open(?:ed)?)?`;

/**
 * A question about the page shown now, as people ask it ("what is the title of the current
 * page", "what's this page's main heading", "and the URL?", "which page am I on?"), → the
 * extractions that answer it; undefined for anything else.
 */
function aboutThisPage(clause: string): Intent[] | undefined {
  let t = clause
    .trim()
    .replace(/^(?:and|also|so|now|ok(?:ay)?|then)\b[\s,]*/i, '')
    .replace(/\s+(?:right\s+now|now|currently|at\s+the\s+moment)$/i, '');
  if (new RegExp(`^(?:what|which)(?:\\s+is|'s)?\\s+${THIS_PAGE}$|^(?:what|which)\\s+page\\s+(?:is\\s+(?:this|open)|am\\s+i\\s+on|are\\s+we\\s+on)$|^where\\s+(?:am\\s+i|are\\s+we)$`, 'i').test(t)) {
    return [{ kind: 'extract', what: 'title' }, { kind: 'extract', what: 'url' }];
  }
  if (new RegExp(`^(?:what(?:\\s+is|'s)\\s+(?:on|in)|what\\s+does)\\s+${THIS_PAGE}(?:\\s+(?:say|show|contain))?$|^what(?:\\s+is|'s)\\s+${THIS_PAGE}\\s+about$`, 'i').test(t)) return [{ kind: 'extract', what: 'text' }];
  t = t
    .replace(new RegExp(`\\b${THIS_PAGE}'s\\s+`, 'i'), "the page's ")
    .replace(new RegExp(`\\s+(?:at\\s+the\\s+top\\s+)?(?:of|on|in|at|for|from)\\s+${THIS_PAGE}$`, 'i'), '')
    .replace(/\b(?:h1|top\s+heading|headline)\b/i, 'main heading')
    .replace(/\b(?:current|page)\s+(title|heading|url)\b/i, '$1')
    .replace(/^what\s+does\s+(the\s+(?:main\s+|first\s+)?(?:heading|title))\s+say$/i, 'what is $1');
  // An elliptical follow-up: "the main heading?" after an earlier question.
  if (/^(?:the\s+)?(?:(?:main|first)\s+)?(?:heading|title|url)$/i.test(t)) t = `what is ${t}`;
  const one = parseInstruction(t);
  return one?.kind === 'extract' && ['title', 'heading', 'url'].includes(one.what) ? [one] : undefined;
}

/** One clause → its intents: an instruction, a question about the page shown now, or one about a page ("what is the title of URL") that opens it first. */
export function parseClause(s: string): Intent[] | undefined {
  const one = parseInstruction(s);
  if (one) return [one];
  const here = aboutThisPage(s);
  if (here) return here;
  const m = s.match(new RegExp(`^(.+?)\\s+(?:of|on|from|at|in)\\s+(?:the\\s+)?(?:page\\s+|site\\s+|website\\s+)?${URL_RE}$`, 'i'));
  if (!m) return undefined;
  const rest = parseInstruction(m[1]!);
  return rest && !['navigate', 'shell', 'write', 'save', 'read_file', 'list_files', 'answer'].includes(rest.kind) ? [{ kind: 'navigate', url: m[2]! }, rest] : undefined;
}

/** Example instructions, from the table of actions: browser ones (and done) for every agent, code ones for browsercode. */
const examples = (kinds: ActionSpec['kind'][]) => Object.values(SPECS).filter((s) => kinds.includes(s.kind)).flatMap((s) => s.builtin?.examples ?? []);
const UNDERSTOOD = [...examples(['browser', 'answer']), 'questions such as "what is the title of <url>", "list the links on <url>" or, of the page shown now, "what is the main heading of the current page"'].join('; ');
const UNDERSTOOD_CODE = `; ${[...examples(['code']), "keep the entries with status 'open'"].join('; ')}`;
/** How to get a model that follows tasks in plain language (names of the run service's settings). */
export const LLM_HINT = 'Tasks that need judgement need an LLM: the service operator sets OPENAI_BASE_URL (an OpenAI-compatible endpoint, with OPENAI_MODELS) or ANTHROPIC_API_KEY, and the run names that model in "model"';

/** Parses a whole task; throws ModelError saying which clause it cannot follow, how to rephrase it, and how to get an LLM. */
export function parseTask(task: string, toolset: Toolset = 'browser'): Instruction[] {
  const steps = splitInstructions(task);
  if (!steps.length) throw new ModelError(`The builtin model needs at least one instruction, such as: ${UNDERSTOOD}. ${LLM_HINT}.`);
  return steps.flatMap((source, i) => {
    const intents = parseClause(source);
    if (!intents) {
      // A clause that did not start with a known verb stayed joined to the one before it: quote the part that fails.
      const failing = splitClauses(source, true).find((part) => !parseClause(part.trim())) ?? source;
      const which = steps.length > 1 ? ` (step ${i + 1} of ${steps.length})` : '';
      throw new ModelError(
        `The builtin model cannot follow this step: "${failing.trim()}"${which}. It follows explicit instructions, one per sentence or joined by "and", "then" or commas; rephrase the step as one of: ${UNDERSTOOD}${toolset === 'code' ? UNDERSTOOD_CODE : ''}. ${LLM_HINT}.`,
      );
    }
    const code = intents.find((it) => CODE_INTENTS.includes(it.kind));
    if (toolset === 'browser' && code) throw new ModelError(`"${source}" needs a terminal or files, which browser-agent does not have; use the browsercode agent`);
    return intents.map((intent) => ({ source, intent }));
  });
}

const norm = (s: string) => s.toLowerCase().replace(/\s+/g, ' ').replace(/[:*]\s*$/, '').trim();

/** Inputs a task may name by their kind ("the date field"), and their types. */
const FIELD_KINDS: Record<string, string> = { date: 'date', time: 'time', datetime: 'datetime-local', 'date and time': 'datetime-local', month: 'month', week: 'week', colour: 'color', color: 'color', slider: 'range', range: 'range', number: 'number' };

/** The element `target` names: by id (`#id`), then exact, prefix and substring matches of its texts. */
export function findElement(elements: PageElement[], target: string, want: 'field' | 'click' | 'file' | 'scroll', hint?: string): PageElement | undefined {
  if (target.startsWith('#')) return elements.find((e) => e.id === target.slice(1));
  const t = norm(target);
  const fieldTags = ['input', 'textarea', 'select'];
  // A box listed only because it scrolls is a target for scrolling alone.
  let pool = want === 'scroll' ? elements.filter((e) => e.scroll) : elements.filter((e) => !e.container);
  if (want === 'field') pool = pool.filter((e) => fieldTags.includes(e.tag) || e.role === 'textbox' || e.role === 'slider');
  if (want === 'file') pool = elements.filter((e) => e.tag === 'input' && e.type === 'file');
  if (want === 'click' && hint === 'link') pool = elements.filter((e) => e.tag === 'a') ;
  if (want === 'click' && hint === 'button') pool = elements.filter((e) => e.tag === 'button' || e.role === 'button' || (e.tag === 'input' && ['submit', 'button'].includes(e.type)));
  const keys = (e: PageElement) => (want === 'click' ? [e.text, e.label, e.name, e.id] : [e.label, e.placeholder, e.name, e.id, e.text]).filter(Boolean).map(norm);
  const byName = pool.find((e) => keys(e).includes(t)) ?? pool.find((e) => keys(e).some((k) => k.startsWith(t))) ?? pool.find((e) => keys(e).some((k) => k.includes(t)));
  // "the date field", "the slider": a field named by its kind.
  return byName ?? (want === 'field' && FIELD_KINDS[t] ? pool.find((e) => e.tag === 'input' && e.type === FIELD_KINDS[t]) : undefined);
}

/** The page's search box: a search input, else a field named or labelled for searching. */
export function searchField(elements: PageElement[]): PageElement | undefined {
  const fields = elements.filter((e) => (e.tag === 'input' && !['checkbox', 'radio', 'submit', 'button', 'file', 'hidden', 'password'].includes(e.type)) || e.role === 'searchbox' || e.role === 'combobox' || e.role === 'textbox');
  return fields.find((e) => e.type === 'search' || e.role === 'searchbox') ?? fields.find((e) => ['q', 'query', 's', 'search'].includes(e.name.toLowerCase()) || /search/i.test([e.label, e.placeholder, e.name, e.id].join(' ')));
}

/** The nth link (1-based; -1 the last) with visible text; a "result" also skips links back to this page. */
export function nthLink(o: { url: string; elements: PageElement[] }, nth: number, of: 'link' | 'result'): PageElement | undefined {
  const here = o.url.split('#')[0];
  const links = o.elements.filter((e) => e.tag === 'a' && e.text.trim() && (of === 'link' || (!/^javascript:/i.test(e.href) && e.href.split('#')[0] !== here)));
  return nth < 0 ? links[links.length + nth] : links[nth - 1];
}

/** The entries of a JSON list whose `field` equals `value` (case-insensitive), as JSON. */
function keepEntries(found: string | undefined, k: { field: string; value: string }, source: string): string {
  let list: unknown;
  try {
    list = JSON.parse(found ?? '');
  } catch {
    throw new ModelError(`"${source}": the last thing found is not JSON (read a JSON file or extract a table first)`);
  }
  if (!Array.isArray(list)) throw new ModelError(`"${source}": the last thing found is not a JSON list`);
  const want = k.value.toLowerCase();
  const key = (o: Record<string, unknown>) => Object.keys(o).find((f) => norm(f) === norm(k.field));
  return JSON.stringify(list.filter((e) => e && typeof e === 'object' && String((e as Record<string, unknown>)[key(e as Record<string, unknown>) ?? k.field] ?? '').toLowerCase() === want), null, 2);
}

/** A JSON list of objects as CSV (header from the keys), or undefined when it is not one. */
export function asCsv(text: string): string | undefined {
  let rows: unknown;
  try {
    rows = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(rows) || !rows.length || !rows.every((r) => r && typeof r === 'object' && !Array.isArray(r))) return undefined;
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r as object)))];
  const cell = (v: unknown) => {
    const s = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [cols.map(cell).join(','), ...rows.map((r) => cols.map((c) => cell((r as Record<string, unknown>)[c])).join(','))].join('\n');
}

export class BuiltinModel implements AgentModel {
  readonly name = 'builtin';
  readonly #instructions: Instruction[];
  #next = 0;
  /** A result the model derived itself ("keep the entries with …"), and after how many steps. */
  #found: { text: string; at: number } | undefined;

  constructor(task: string, toolset: Toolset = 'browser') {
    this.#instructions = parseTask(task, toolset);
  }

  /** Its place in the task (and what it derived), so a run taken over goes on with the next instruction. */
  snapshot(): { next: number; found?: { text: string; at: number } } {
    return { next: this.#next, ...(this.#found ? { found: this.#found } : {}) };
  }

  restore(state: unknown): void {
    const s = state as { next?: unknown; found?: { text: string; at: number } } | undefined;
    if (typeof s?.next === 'number') this.#next = s.next;
    this.#found = s?.found;
  }

  /** The answer: an explicit `answer`, else what was extracted (one per line), else "Done". */
  #result(input: DecideInput): string {
    if (this.#found && this.#found.at === input.history.length) return this.#found.text;
    return turnResult('', input.history);
  }

  /** What the run found last: a kept subset, else the last extraction (or command output, file read). */
  #lastFound(history: DecideInput['history']): string | undefined {
    const at = history.findLastIndex((h) => h.extracted !== undefined && h.action.name !== 'write_file');
    if (this.#found && this.#found.at > at) return this.#found.text;
    return history[at]?.extracted;
  }

  async decide(input: DecideInput, _signal?: AbortSignal): Promise<Decision> {
    const instr = this.#instructions[this.#next];
    if (!instr) return { thought: 'All instructions are done', action: { name: 'done', result: this.#result(input) } };
    const { intent, source } = instr;
    const page = () => {
      if (!input.observation) throw new NeedsBrowser();
      return input.observation;
    };
    const need = (target: string, want: 'field' | 'click' | 'file' | 'scroll', hint?: string) => {
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
      case 'click_nth': {
        const o = page();
        const el = nthLink(o, intent.nth, intent.of);
        if (!el) throw new ModelError(`"${source}": the page ${o.url} has no such ${intent.of} (${o.elements.filter((e) => e.tag === 'a').length} links)`);
        action = { name: 'click', index: el.index };
        break;
      }
      case 'find_text':
        page();
        action = { name: 'find_text', text: intent.text };
        break;
      case 'keep': {
        this.#found = { text: keepEntries(this.#lastFound(input.history), intent, source), at: input.history.length };
        this.#next++;
        return this.decide(input, _signal);
      }
      case 'type':
        action = { name: 'type', index: need(intent.target, 'field'), text: intent.value, submit: intent.submit };
        break;
      case 'select':
        action = { name: 'select', index: need(intent.target, 'field'), option: intent.value };
        break;
      case 'search': {
        const o = page();
        const el = searchField(o.elements);
        if (!el) throw new ElementNotFound('search field', o.url);
        action = { name: 'type', index: el.index, text: intent.value, submit: true };
        break;
      }
      case 'press':
        page();
        action = { name: 'press', key: intent.key };
        break;
      case 'scroll':
        page();
        action = { name: 'scroll', direction: intent.direction, ...(intent.target !== undefined ? { index: need(intent.target, 'scroll') } : {}) };
        break;
      case 'drag':
        action = { name: 'drag', index: need(intent.target, 'click'), ...(intent.onto !== undefined ? { to: need(intent.onto, 'click') } : { dx: intent.dx, dy: intent.dy }) };
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
          action = { name: 'extract', what: intent.what, ...(intent.table !== undefined ? { table: intent.table } : {}) };
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
      case 'read_download': {
        page();
        const latest = input.downloads?.at(-1);
        if (!intent.name && !latest) throw new ModelError(`"${source}": the browser has downloaded nothing yet`);
        action = { name: 'read_download', file: intent.name ?? latest!.name };
        break;
      }
      case 'shell':
        action = { name: 'shell', command: intent.command };
        break;
      case 'write':
        action = { name: 'write_file', path: intent.path, content: intent.content };
        break;
      case 'save': {
        // What the run found so far: the last extraction (or command output, file read).
        const last = this.#lastFound(input.history);
        if (last === undefined) throw new ModelError(`"${source}": there is nothing to save yet (extract something or run a command first)`);
        // A long extraction is on the disk, not in the history: read it back whole, then save (this instruction again).
        const saved = savedExtractPath(last);
        if (saved) return { thought: `${source} (reading the whole extraction first)`, action: { name: 'read_file', path: saved } };
        const content = /\.csv$/i.test(intent.path) ? (asCsv(last) ?? last) : last;
        action = { name: 'write_file', path: intent.path, content: content.endsWith('\n') ? content : `${content}\n` };
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
