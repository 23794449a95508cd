/**
 * What the browser-agent costs per step, this code against an earlier commit of it in the same
 * run: the characters of each request (system prompt, user message with observation and history,
 * tool definitions) of one scripted run over the big fixture pages, and observe() time on the
 * largest page. The earlier code is unpacked from git (`git archive`) next to this checkout and
 * loaded as modules of its own, so both see the same machine, browser and pages.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { ROOT } from '../scripts/stack.js';
import { launchTestChromium } from '../test/support/agent-loop.js';
import { startFakeOpenAI, type ChatRequest, type FakeReply } from '../test/support/fake-openai.js';
import { serveSite } from '../test/support/site.js';

/** The agents' modules the bench drives, from either checkout. */
interface AgentCode {
  runLoop: typeof import('../test/support/agent-loop.js').runLoop;
  createModelRegistry: typeof import('../services/run/src/agents/models.js').createModelRegistry;
  observePage: typeof import('../services/run/src/agents/observe.js').observePage;
}

export interface RequestFigures {
  page: string;
  steps: number;
  /** Mean characters per request. */
  before: { system: number; user: number; tools: number; total: number };
  after: { system: number; user: number; tools: number; total: number };
  ratio: number;
}

export interface AgentRequestFigures {
  baseline: string;
  requests: RequestFigures[];
  observeLargest: { page: string; beforeMs: number; afterMs: number; ratio: number; rounds: number };
  /** A page of 300 custom elements without shadow roots: each is asked about once (at most 64 per observation), so the first observations pay for it. */
  observeCustomElements: { elements: number; firstBeforeMs: number; firstAfterMs: number; beforeMs: number; afterMs: number; ratio: number; rounds: number };
}

/** Unpacks `rev`'s services and test support into a temporary directory that resolves packages from this checkout. */
async function codeAt(rev: string): Promise<{ code: AgentCode; dir: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-baseline-'));
  const tar = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', rev, 'services', 'test/support'], { maxBuffer: 256 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  const load = (p: string) => import(path.join(dir, p));
  const [loop, models, observe] = await Promise.all([load('test/support/agent-loop.ts'), load('services/run/src/agents/models.ts'), load('services/run/src/agents/observe.ts')]);
  return { code: { runLoop: loop.runLoop, createModelRegistry: models.createModelRegistry, observePage: observe.observePage }, dir };
}

async function currentCode(): Promise<AgentCode> {
  const [loop, models, observe] = await Promise.all([import('../test/support/agent-loop.js'), import('../services/run/src/agents/models.js'), import('../services/run/src/agents/observe.js')]);
  return { runLoop: loop.runLoop, createModelRegistry: models.createModelRegistry, observePage: observe.observePage };
}

const text = (c: unknown) => (typeof c === 'string' ? c : JSON.stringify(c));
const sizes = (r: ChatRequest) => {
  const system = r.messages.filter((m) => m.role === 'system').reduce((a, m) => a + text(m.content).length, 0);
  const user = r.messages.filter((m) => m.role !== 'system').reduce((a, m) => a + text(m.content).length, 0);
  const tools = JSON.stringify(r.tools ?? []).length;
  return { system, user, tools, total: system + user + tools };
};
const mean = (xs: { system: number; user: number; tools: number; total: number }[]) => {
  const m = (k: keyof (typeof xs)[number]) => Math.round(xs.reduce((a, x) => a + x[k], 0) / xs.length);
  return { system: m('system'), user: m('user'), tools: m('tools'), total: m('total') };
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The scripted run on `page`: open it, read it, scroll it down a few times, extract its text, done (the same replies for both codes). */
const script =
  (url: string, scrolls: number) =>
  (_req: ChatRequest, n: number): FakeReply =>
    n === 0 ? { tool: 'navigate', args: { url } } : n <= scrolls ? { tool: 'scroll', args: { direction: 'down' } } : n === scrolls + 1 ? { tool: 'extract', args: { what: 'heading' } } : { tool: 'done', args: { result: 'read' } };

export async function agentRequestsBench(opts: { rounds: number; baseline?: string }): Promise<AgentRequestFigures> {
  // The agents as they were before issue 22's leaner requests, fenced history and closed shadow roots.
  const baseline = opts.baseline ?? '45d3c60';
  const site = await serveSite();
  const fake = await startFakeOpenAI();
  const before = await codeAt(baseline);
  const after = await currentCode();
  let browser: Browser | undefined;
  try {
    browser = await launchTestChromium();
    const requests: RequestFigures[] = [];
    for (const name of ['obs-big.html', 'obs-long.html', 'extract-long.html']) {
      const per: Record<'before' | 'after', ReturnType<typeof mean>> = { before: { system: 0, user: 0, tools: 0, total: 0 }, after: { system: 0, user: 0, tools: 0, total: 0 } };
      let steps = 0;
      for (const [which, code] of [['before', before.code], ['after', after]] as const) {
        fake.requests.length = 0;
        fake.script = script(site.url(name), 4);
        const page = await browser.newPage();
        try {
          const models = code.createModelRegistry({ openaiBaseUrl: fake.baseUrl, openaiModels: ['fake-gpt'], anthropicModels: [], prices: {}, timeoutMs: 10000, maxRetries: 0 });
          await code.runLoop({ browser, model: models.create('fake-gpt', 'Read the page'), task: 'Read the page', maxSteps: 20, timeoutMs: 120000 });
        } finally {
          await page.close();
        }
        // The first request is of the blank tab: the page's own start at the second.
        const onPage = fake.requests.slice(1).map(sizes);
        per[which] = mean(onPage);
        steps = onPage.length;
      }
      requests.push({ page: name, steps, ...per, ratio: per.after.total / per.before.total });
    }

    const largest = 'obs-big.html';
    const page: Page = await browser.newPage();
    await page.goto(site.url(largest), { waitUntil: 'networkidle0' });
    const b: number[] = [];
    const a: number[] = [];
    // Alternating, so both see the same machine load; one warm-up each.
    for (let i = 0; i <= opts.rounds; i++) {
      let t0 = performance.now();
      await before.code.observePage(browser, page);
      if (i) b.push(performance.now() - t0);
      t0 = performance.now();
      await after.observePage(browser, page);
      if (i) a.push(performance.now() - t0);
    }
    await page.close();
    const beforeMs = median(b);
    const afterMs = median(a);

    // Each code on a page of its own, so the marks of one do not spare the other.
    const elements = 300;
    const html = `<h1>Components</h1>${Array.from({ length: elements }, (_, i) => `<x-card><a href="#${i}">Card ${i}</a></x-card>`).join('')}<script>customElements.define('x-card', class extends HTMLElement {})</script>`;
    const times: Record<'before' | 'after', number[]> = { before: [], after: [] };
    for (const [which, observe] of [['before', before.code.observePage], ['after', after.observePage]] as const) {
      const p = await browser.newPage();
      await p.setContent(html);
      for (let i = 0; i < opts.rounds + 6; i++) {
        const t0 = performance.now();
        await observe(browser, p);
        times[which].push(performance.now() - t0);
      }
      await p.close();
    }
    const settled = (xs: number[]) => median(xs.slice(6));
    const observeCustomElements = {
      elements,
      firstBeforeMs: times.before[0]!,
      firstAfterMs: times.after[0]!,
      beforeMs: settled(times.before),
      afterMs: settled(times.after),
      ratio: settled(times.after) / settled(times.before),
      rounds: opts.rounds,
    };
    return { baseline, requests, observeLargest: { page: largest, beforeMs, afterMs, ratio: afterMs / beforeMs, rounds: opts.rounds }, observeCustomElements };
  } finally {
    await browser?.close();
    await fake.close();
    await site.close();
    fs.rmSync(before.dir, { recursive: true, force: true });
  }
}
