/**
 * Reading a page for the agent: the deterministic extractions (title, heading, text, links,
 * tables, markdown), each narrowed to an element or selector when asked; `find_text`; questions
 * answered by the model over the page as markdown, chunk by chunk; and extractions too large to
 * hand back inline, which are written to the run's disk with the result saying where.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ElementHandle, Page } from 'puppeteer-core';
import { inFrame } from './observe.js';

/** The deterministic readings of a page. */
export type ExtractWhat = 'title' | 'heading' | 'text' | 'links' | 'table' | 'url' | 'markdown';

/**
 * What an `extract` asks. Deterministic modes (`what`) may be narrowed to an element (`index`) or
 * CSS `selector`; `table` picks a table by its 1-based number or caption/heading. A `question`
 * (with an optional JSON `schema` for the answer) is answered by the model over the page as markdown.
 */
export interface ExtractInput {
  what?: ExtractWhat;
  index?: number;
  selector?: string;
  table?: number | string;
  question?: string;
  schema?: Record<string, unknown>;
}

/** Longest extraction returned inline; a longer one goes to the run's disk. */
export const MAX_INLINE_EXTRACT = 4000;
/** Characters of page markdown per question call, and most calls per question. */
export const QUESTION_CHUNK_CHARS = 24000;
export const MAX_QUESTION_CHUNKS = 8;

/** A question about the page for the model: one part of the page, or (`partials`) the answers from each part to combine. */
export interface PageQuestion {
  question: string;
  schema?: Record<string, unknown> | undefined;
  url: string;
  markdown?: string;
  part?: { n: number; of: number };
  partials?: string[];
}

/** Answers a page question (an LLM's separate call); absent for the builtin, which only extracts deterministically. */
export type AskPage = (q: PageQuestion) => Promise<string>;

/** What a part of the page answers when it does not hold the answer. */
export const NOT_ON_PAGE = 'NOT_FOUND';

export class ExtractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = this.constructor.name;
  }
}

type Read = { ok: string } | { error: string };

/* Runs in the page: one deterministic extraction, within `root` (the element [index]) or `selector` when given. */
function readPage(a: { what: ExtractWhat; selector?: string | undefined; table?: number | string | undefined }, element?: Element): Read {
  const clean = (s: string | null | undefined) => (s ?? '').replace(/\s+/g, ' ').trim();
  let scope: Element | null = element ?? document.body ?? document.documentElement;
  if (!element && a.selector) {
    try {
      scope = document.querySelector(a.selector);
    } catch {
      return { error: `${a.selector} is not a valid CSS selector` };
    }
    if (!scope) return { error: `Nothing on the page matches ${a.selector}` };
  }
  const root = scope!;
  const visible = (el: Element) => {
    const s = getComputedStyle(el);
    return s.display !== 'none' && s.visibility !== 'hidden';
  };

  const headings = Array.from(document.querySelectorAll('h1,h2,h3,h4,h5,h6'));
  /** A table's names: caption, aria-label, id, and the nearest heading before it. */
  const tableNames = (t: HTMLTableElement) => {
    const before = headings.filter((h) => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING).pop();
    const labelledBy = t.getAttribute('aria-labelledby');
    return [clean(t.caption?.innerText), clean(t.getAttribute('aria-label')), labelledBy ? clean(document.getElementById(labelledBy)?.innerText) : '', t.id, clean((before as HTMLElement | undefined)?.innerText)].filter(Boolean);
  };
  const tableRows = (t: HTMLTableElement) => {
    const rows = Array.from(t.rows);
    const headerRow = t.tHead?.rows[0] ?? rows[0];
    if (!headerRow) return [];
    const headers = Array.from(headerRow.cells).map((c, i) => clean(c.innerText) || `column${i + 1}`);
    return rows
      .filter((r) => r !== headerRow)
      .map((r) => Array.from(r.cells).map((c) => clean(c.innerText)))
      .filter((cells) => cells.length > 0)
      .map((cells) => Object.fromEntries(headers.map((h, i) => [h, cells[i] ?? ''])));
  };

  switch (a.what) {
    case 'title':
      return { ok: document.title };
    case 'url':
      return { ok: location.href };
    case 'heading': {
      const h = root.matches('h1,h2,h3') ? root : (root.querySelector('h1') ?? root.querySelector('h2') ?? root.querySelector('h3'));
      return h ? { ok: clean((h as HTMLElement).innerText || h.textContent) } : { error: element || a.selector ? 'That part of the page has no heading' : 'The page has no heading' };
    }
    case 'links': {
      const links = root.matches('a[href]') ? [root] : Array.from(root.querySelectorAll('a[href]'));
      return { ok: JSON.stringify(links.filter(visible).map((l) => ({ text: clean((l as HTMLElement).innerText), href: (l as HTMLAnchorElement).href }))) };
    }
    case 'table': {
      const own = root.closest('table');
      const tables = (own ? [own] : Array.from(root.querySelectorAll('table'))).filter((t) => visible(t) && !t.parentElement?.closest('table')) as HTMLTableElement[];
      if (!tables.length) return { error: element || a.selector ? 'There is no table there' : 'The page has no table' };
      let table: HTMLTableElement | undefined;
      const list = () => tables.map((t, i) => `${i + 1}: ${JSON.stringify(tableNames(t)[0] ?? '(unnamed)')}`).join(', ');
      if (a.table === undefined) table = tables[0];
      else if (typeof a.table === 'number') {
        table = a.table < 0 ? tables[tables.length + a.table] : tables[a.table - 1];
        if (!table) return { error: `There is no table ${a.table}: the page has ${tables.length} (${list()})` };
      } else {
        const want = clean(a.table).toLowerCase();
        const singular = want.replace(/s$/, '');
        const names = tables.map((t) => tableNames(t).map((n) => n.toLowerCase()));
        const i = [(n: string) => n === want, (n: string) => n.includes(want), (n: string) => n.includes(singular)].map((f) => names.findIndex((ns) => ns.some(f))).find((x) => x >= 0);
        table = i === undefined ? undefined : tables[i];
        if (!table) return { error: `No table is named ${JSON.stringify(a.table)}: the page has ${tables.length} (${list()})` };
      }
      return { ok: JSON.stringify(tableRows(table!)) };
    }
    case 'text':
      return { ok: ((root as HTMLElement).innerText ?? root.textContent ?? '').trim() };
    case 'markdown': {
      const out: string[] = [];
      const inline = (n: Node): string => {
        if (n.nodeType === Node.TEXT_NODE) return (n.textContent ?? '').replace(/\s+/g, ' ');
        if (!(n instanceof HTMLElement) || ['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(n.tagName) || !visible(n)) return '';
        const inner = Array.from(n.childNodes).map(inline).join('');
        if (n.tagName === 'A' && (n as HTMLAnchorElement).href && inner.trim()) return `[${inner.trim()}](${(n as HTMLAnchorElement).href})`;
        if (n.tagName === 'IMG') return (n as HTMLImageElement).alt ? `![${(n as HTMLImageElement).alt}]` : '';
        if (n.tagName === 'BR') return '\n';
        if (['STRONG', 'B'].includes(n.tagName) && inner.trim()) return `**${inner.trim()}**`;
        if (n.tagName === 'CODE') return `\`${inner}\``;
        return inner;
      };
      const BLOCK = /^(P|DIV|SECTION|ARTICLE|MAIN|HEADER|FOOTER|NAV|ASIDE|UL|OL|LI|H[1-6]|TABLE|PRE|BLOCKQUOTE|FORM|FIELDSET|DL|DT|DD|FIGURE|BODY)$/;
      const block = (el: Element, depth: number) => {
        if (!(el instanceof HTMLElement) || ['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(el.tagName) || !visible(el)) return;
        const tag = el.tagName;
        if (/^H[1-6]$/.test(tag)) return void out.push(`${'#'.repeat(Number(tag[1]))} ${clean(el.innerText)}`);
        if (tag === 'PRE') return void out.push('```\n' + el.innerText.replace(/\n+$/, '') + '\n```');
        if (tag === 'TABLE') {
          const caption = clean((el as HTMLTableElement).caption?.innerText);
          if (caption) out.push(`Table: ${caption}`);
          const rows = Array.from((el as HTMLTableElement).rows).map((r) => Array.from(r.cells).map((c) => clean(c.innerText).replace(/\|/g, '\\|')));
          if (rows.length) {
            const width = Math.max(...rows.map((r) => r.length));
            const line = (r: string[]) => `| ${Array.from({ length: width }, (_, i) => r[i] ?? '').join(' | ')} |`;
            out.push([line(rows[0]!), `|${' --- |'.repeat(width)}`, ...rows.slice(1).map(line)].join('\n'));
          }
          return;
        }
        if (tag === 'LI') {
          const text = clean(Array.from(el.childNodes).filter((c) => !(c instanceof HTMLElement && /^(UL|OL)$/.test(c.tagName))).map(inline).join(''));
          if (text) out.push(`${'  '.repeat(Math.max(0, depth - 1))}- ${text}`);
          for (const c of Array.from(el.children)) if (/^(UL|OL)$/.test(c.tagName)) block(c, depth + 1);
          return;
        }
        const hasBlocks = Array.from(el.children).some((c) => BLOCK.test(c.tagName));
        if (!hasBlocks || !BLOCK.test(tag)) {
          const text = inline(el).replace(/[ \t]+/g, ' ').replace(/ ?\n ?/g, '\n').trim();
          if (text) out.push(tag === 'BLOCKQUOTE' ? `> ${text}` : text);
          return;
        }
        let run = '';
        for (const c of Array.from(el.childNodes)) {
          if (c instanceof Element && BLOCK.test(c.tagName)) {
            if (run.trim()) out.push(clean(run));
            run = '';
            block(c, /^(UL|OL)$/.test(c.tagName) ? depth + 1 : depth);
          } else run += inline(c);
        }
        if (run.trim()) out.push(clean(run));
      };
      block(root, 0);
      return { ok: out.join('\n\n') };
    }
  }
}

/* Runs in a frame: where `text` occurs (case-insensitive), in open shadow roots too, with context and the heading above; scrolls to the first when asked. */
function findOnPage(a: { text: string; scroll: boolean }): { count: number; matches: { context: string; heading: string }[] } {
  const want = a.text.toLowerCase().replace(/\s+/g, ' ').trim();
  const headings = Array.from(document.querySelectorAll('h1,h2,h3,h4,h5,h6'));
  const blocks = 'p,li,td,th,h1,h2,h3,h4,h5,h6,pre,blockquote,dd,dt,label,button,a,div,section,article';
  const matches: { context: string; heading: string }[] = [];
  const seen = new Set<Element>();
  let count = 0;
  let first: Element | null = null;
  const has = (el: Element) => ((el as HTMLElement).innerText ?? '').replace(/\s+/g, ' ').toLowerCase().includes(want);
  const visit = (root: Node) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n instanceof Element) {
        if (n.shadowRoot) visit(n.shadowRoot);
        continue;
      }
      const parent = n.parentElement;
      if (!parent || ['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(parent.tagName)) continue;
      // The whole block's text, so a phrase split by inline tags (<b>, <a>) is still found; counted once, in the innermost block.
      const block = parent.closest(blocks) ?? parent;
      if (seen.has(block) || !has(block) || Array.from(block.querySelectorAll(blocks)).some(has)) continue;
      const style = getComputedStyle(block);
      if (style.display === 'none' || style.visibility === 'hidden') continue;
      seen.add(block);
      const hay = (block as HTMLElement).innerText.replace(/\s+/g, ' ');
      for (let at = hay.toLowerCase().indexOf(want); at >= 0; at = hay.toLowerCase().indexOf(want, at + want.length)) {
        count++;
        if (matches.length < 5) {
          // Inside a shadow root, the heading above is the one above its host.
          let anchor: Node = block;
          while (anchor.getRootNode() instanceof ShadowRoot) anchor = (anchor.getRootNode() as ShadowRoot).host;
          const heading = headings.filter((h) => h.compareDocumentPosition(anchor) & Node.DOCUMENT_POSITION_FOLLOWING).pop();
          matches.push({ context: `${at > 60 ? '…' : ''}${hay.slice(Math.max(0, at - 60), at + want.length + 60).trim()}${at + want.length + 60 < hay.length ? '…' : ''}`, heading: (heading as HTMLElement | undefined)?.innerText.trim() ?? '' });
        }
      }
      first ??= block;
    }
  };
  visit(document.body ?? document.documentElement);
  if (a.scroll) (first as Element | null)?.scrollIntoView({ block: 'center' });
  return { count, matches };
}

/** Reports whether and where `text` occurs on the page (its frames and open shadow roots too), and scrolls to its first occurrence. */
export async function findText(page: Page, text: string): Promise<string> {
  if (!text.trim()) throw new ExtractError('find_text needs a text to look for');
  let count = 0;
  const matches: { context: string; heading: string }[] = [];
  for (const frame of page.frames()) {
    // A frame that is going away has nothing to find.
    const r = await inFrame(frame, findOnPage, { text, scroll: count === 0 }).catch(() => ({ count: 0, matches: [] }));
    count += r.count;
    matches.push(...r.matches.slice(0, 5 - matches.length));
  }
  if (!count) return `${JSON.stringify(text)} does not occur on the page`;
  const where = matches.map((m, i) => `${i + 1}. ${m.heading ? `under "${m.heading}": ` : ''}${m.context}`).join('\n');
  return `${JSON.stringify(text)} occurs ${count} time${count === 1 ? '' : 's'} on the page; scrolled to the first.\n${where}${count > matches.length ? `\n(and ${count - matches.length} more)` : ''}`;
}

/** Splits markdown into parts of at most `size` characters, at blank lines where it can. */
export function chunkMarkdown(md: string, size = QUESTION_CHUNK_CHARS): string[] {
  const parts: string[] = [];
  let cur = '';
  for (const block of md.split(/\n{2,}/)) {
    for (let b = block; b.length; ) {
      const room = size - cur.length - (cur ? 2 : 0);
      if (b.length <= room) {
        cur += (cur ? '\n\n' : '') + b;
        b = '';
      } else if (cur) {
        parts.push(cur);
        cur = '';
      } else {
        parts.push(b.slice(0, size));
        b = b.slice(size);
      }
    }
  }
  if (cur) parts.push(cur);
  return parts;
}

/** Answers a question over the page's markdown: each part on its own, then the answers combined. */
async function answerQuestion(at: ExtractScope, a: ExtractInput, ask: AskPage): Promise<string> {
  const md = await read(at, { what: 'markdown', selector: a.selector });
  const all = chunkMarkdown(md);
  const parts = all.slice(0, MAX_QUESTION_CHUNKS);
  const base = { question: a.question!, schema: a.schema, url: at.page.url() };
  const answers: string[] = [];
  for (const [i, markdown] of parts.entries()) {
    const answer = (await ask({ ...base, markdown, part: { n: i + 1, of: parts.length } })).trim();
    if (answer && !answer.includes(NOT_ON_PAGE)) answers.push(answer);
  }
  const skipped = all.length > parts.length ? ` (only the first ${parts.length} of ${all.length} parts of the page were read)` : '';
  if (!answers.length) return `The page does not answer ${JSON.stringify(a.question)}${skipped}`;
  const answer = answers.length === 1 ? answers[0]! : (await ask({ ...base, partials: answers })).trim();
  return answer + skipped;
}

/** What an extraction reads: the whole page, or one element ([index], in whichever frame it is). */
export interface ExtractScope {
  page: Page;
  element?: ElementHandle<Element> | undefined;
}

async function read(at: ExtractScope, a: Parameters<typeof readPage>[0]): Promise<string> {
  // Within an element: read from its handle, in its own frame and shadow root (as source text, like inFrame).
  const r = at.element
    ? ((await at.element.evaluate(new Function('element', `const __name = (f) => f; return (${readPage.toString()})(${JSON.stringify(a)}, element);`) as (element: Element) => Read)) as Read)
    : await inFrame(at.page, readPage, a);
  if ('error' in r) throw new ExtractError(r.error);
  return r.ok;
}

/** Carries out an `extract`: a question when it has one (needs `ask`), else a deterministic mode. */
export async function extract(at: ExtractScope, a: ExtractInput, ask: AskPage | undefined): Promise<{ text: string; kind: ExtractWhat | 'answer' }> {
  if (a.question !== undefined) {
    if (!ask) throw new ExtractError('This model cannot answer questions about a page; extract the title, heading, text, links, a table or the page as markdown instead');
    return { text: await answerQuestion(at, a, ask), kind: 'answer' };
  }
  const what = a.what ?? 'text';
  // A model may send the table's number as text ("2").
  const table = typeof a.table === 'string' && /^\s*-?\d+\s*$/.test(a.table) ? Number(a.table) : a.table;
  return { text: await read(at, { what, selector: a.selector, table }), kind: what };
}

const EXT: Record<string, string> = { links: 'json', table: 'json', markdown: 'md' };

/**
 * An extraction as the model and the answer get it: whole when short; when long, written to the
 * run's disk (extracts/…) with a notice first, saying where and how long, and its beginning.
 */
export async function deliverExtract(text: string, kind: string, diskDir: string | undefined): Promise<string> {
  if (text.length <= MAX_INLINE_EXTRACT) return text;
  const preview = (room: number) => `${text.slice(0, room)}…`;
  if (!diskDir) return `The extraction is ${text.length} characters; this run has no disk to save it to, so only the first ${MAX_INLINE_EXTRACT - 200} are shown:\n${preview(MAX_INLINE_EXTRACT - 200)}`;
  const dir = path.join(diskDir, 'extracts');
  await fs.mkdir(dir, { recursive: true });
  const ext = EXT[kind] ?? (/^\s*[[{]/.test(text) ? 'json' : 'txt');
  let rel = '';
  for (let n = 1; ; n++) {
    rel = `extracts/${kind}-${n}.${ext}`;
    try {
      await fs.writeFile(path.join(diskDir, rel), text, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const notice = `The extraction is ${text.length} characters, too long to show here: it is saved in full on the run's disk as ${rel}. It begins:\n`;
  return notice + preview(MAX_INLINE_EXTRACT - notice.length - 1);
}

/** The disk path a long extraction was saved to, read back from what `deliverExtract` returned. */
export function savedExtractPath(delivered: string): string | undefined {
  return /^The extraction is \d+ characters, too long to show here: it is saved in full on the run's disk as (extracts\/\S+)\. It begins:\n/.exec(delivered)?.[1];
}
