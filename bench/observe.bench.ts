/**
 * The observation: time and size of what the model reads of each fixture page, the observation
 * the service used before this change (kept here, verbatim in behaviour: the first 6,000
 * characters of `innerText` plus every matching element of the top document) next to the
 * current one, in the same browser and run. Size in characters and ~tokens (characters / 4).
 */
import type { Page } from 'puppeteer-core';
import { launchTestChromium, runLoop } from '../test/support/agent-loop.js';
import { startFakeOpenAI } from '../test/support/fake-openai.js';
import { serveSite } from '../test/support/site.js';
import { createModelRegistry } from '../services/run/src/agents/models.js';
import { observePage } from '../services/run/src/agents/observe.js';

/** Characters of each request (messages and tools) of a 30-step run scrolling the 3,000-link page. */
export interface PromptFigures {
  steps: number;
  step1Chars: number;
  step2Chars: number;
  step30Chars: number;
  maxChars: number;
}

export interface ObservationFigures {
  page: string;
  before: { ms: number; chars: number; tokens: number; elements: number };
  after: { ms: number; chars: number; tokens: number; elements: number };
}

const OLD_SELECTOR = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], [role=link], [role=checkbox], [role=tab], [role=menuitem], [contenteditable=true], [onclick]';

/* The old in-page collector, as it was. */
function oldCollect(selector: string, maxText: number) {
  const root = document.documentElement as HTMLElement;
  let next = Number(root.dataset.oldNext ?? '1');
  const elements = [];
  for (const node of Array.from(document.querySelectorAll(selector))) {
    const el = node as HTMLElement & { value?: string; placeholder?: string; type?: string; href?: string; labels?: NodeListOf<HTMLLabelElement>; options?: HTMLOptionsCollection };
    const rect = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    const fileInput = el.tagName === 'INPUT' && el.type === 'file';
    if (!fileInput && (style.display === 'none' || style.visibility === 'hidden' || (rect.width === 0 && rect.height === 0))) continue;
    if (!el.dataset.oldIdx) el.dataset.oldIdx = String(next++);
    const label = (el.labels && el.labels[0]?.innerText) || el.getAttribute('aria-label') || el.getAttribute('title') || '';
    const text = (el.innerText || (el.tagName === 'INPUT' && ['submit', 'button', 'reset'].includes(el.type ?? '') ? el.value : '') || '').trim();
    elements.push({
      index: Number(el.dataset.oldIdx),
      tag: el.tagName.toLowerCase(),
      type: el.type ?? '',
      text: text.replace(/\s+/g, ' ').slice(0, 120),
      label: label.trim().replace(/\s+/g, ' ').slice(0, 120),
      placeholder: el.placeholder ?? '',
      name: el.getAttribute('name') ?? '',
      href: el.tagName === 'A' ? (el.href ?? '') : '',
      ...(el.tagName === 'SELECT' && el.options ? { options: Array.from(el.options).map((o) => o.text.trim()) } : {}),
    });
  }
  root.dataset.oldNext = String(next);
  return { elements, text: (document.body?.innerText ?? '').slice(0, maxText) };
}

/** The old observation and the old page description, as the model received them. */
async function oldObservation(page: Page): Promise<{ text: string; elements: number }> {
  const { elements, text } = await page.evaluate(oldCollect, OLD_SELECTOR, 6000);
  const title = await page.title();
  const els = elements
    .map((e) => {
      const words = [e.text, e.label && `label="${e.label}"`, e.placeholder && `placeholder="${e.placeholder}"`, e.name && `name="${e.name}"`, e.href && `href="${e.href}"`, e.options && `options=${JSON.stringify(e.options)}`].filter(Boolean).join(' ');
      return `[${e.index}] <${e.tag}${e.type && e.tag === 'input' ? ` type=${e.type}` : ''}> ${words}`;
    })
    .join('\n');
  return { text: `URL: ${page.url()}\nTitle: ${title}\nTabs:\n* tab 0: ${title} — ${page.url()}\nInteractive elements:\n${els || '(none)'}\nVisible text:\n${text}`, elements: elements.length };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function observeBench(opts: { rounds: number }): Promise<ObservationFigures[]> {
  const site = await serveSite();
  const browser = await launchTestChromium();
  const out: ObservationFigures[] = [];
  try {
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    for (const name of ['run-form.html', 'obs-shadow.html', 'obs-frames.html', 'obs-combobox.html', 'obs-state.html', 'obs-overlay.html', 'obs-long.html', 'obs-big.html']) {
      await page.goto(site.url(name), { waitUntil: 'networkidle0' });
      const before: number[] = [];
      const after: number[] = [];
      let old = { text: '', elements: 0 };
      let now = { text: '', elements: 0 };
      // Alternating, so both see the same machine load.
      for (let i = 0; i < opts.rounds; i++) {
        let t0 = performance.now();
        old = await oldObservation(page);
        before.push(performance.now() - t0);
        t0 = performance.now();
        const o = await observePage(browser, page);
        after.push(performance.now() - t0);
        const tabs = o.tabs.map((t) => `${t.active ? '*' : ' '} tab ${t.tab}: ${t.title} — ${t.url}`).join('\n');
        now = { text: `URL: ${o.url}\nTitle: ${o.title}\nTabs:\n${tabs}\nPage:\n${o.text}`, elements: o.elements.length };
      }
      const fig = (ms: number[], r: { text: string; elements: number }) => ({ ms: median(ms), chars: r.text.length, tokens: Math.round(r.text.length / 4), elements: r.elements });
      out.push({ page: name, before: fig(before, old), after: fig(after, now) });
    }
  } finally {
    await browser.close();
    await site.close();
  }
  return out;
}

/** A 30-step run through the loop and a fake OpenAI-compatible server on the 3,000-link page: navigate, scroll down 28 times, done. */
export async function promptSizeBench(): Promise<PromptFigures> {
  const site = await serveSite();
  const fake = await startFakeOpenAI();
  const browser = await launchTestChromium();
  try {
    fake.script = (_req, n) => (n === 0 ? { tool: 'navigate', args: { url: site.url('obs-big.html') } } : n < 29 ? { tool: 'scroll', args: { direction: 'down' } } : { tool: 'done', args: { result: 'end' } });
    const models = createModelRegistry({ openaiBaseUrl: fake.baseUrl, openaiModels: ['fake-gpt'], anthropicModels: [], prices: {}, timeoutMs: 10000, maxRetries: 0 });
    await runLoop({ browser, model: models.create('fake-gpt', 'Read the directory'), task: 'Read the directory', maxSteps: 40, timeoutMs: 120000 });
    const sizes = fake.requests.map((r) => JSON.stringify(r.messages).length + JSON.stringify(r.tools ?? []).length);
    return { steps: sizes.length, step1Chars: sizes[0]!, step2Chars: sizes[1]!, step30Chars: sizes[29]!, maxChars: Math.max(...sizes) };
  } finally {
    await browser.close();
    await fake.close();
    await site.close();
  }
}
