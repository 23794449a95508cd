/** Reading pages for the agent in real Chromium: markdown, questions in parts, and their limits. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'puppeteer-core';
import { launchTestChromium } from '../../../../test/support/agent-loop.js';
import { serveSite, type TestSite } from '../../../../test/support/site.js';
import { runBrowserAction, type Action } from './actions.js';
import { observePage } from './observe.js';
import { ActionError } from './page-tools.js';
import { chunkMarkdown, deliverExtract, savedExtractPath, type PageQuestion } from './page-extract.js';

let site: TestSite;
let browser: Browser;
let page: Page;
before(async () => {
  site = await serveSite();
  browser = await launchTestChromium();
  page = (await browser.pages())[0] ?? (await browser.newPage());
});
after(async () => {
  await browser.close();
  await site.close();
});

const extracted = async (action: Action, ask?: (q: PageQuestion) => Promise<string>) => (await runBrowserAction(action, { browser, page, timeoutMs: 5000, signal: new AbortController().signal, ask })).output;

describe('reading a page', () => {
  test('when a page is read as markdown, then headings, table captions and rows and links keep their shape; other modes take a selector, or a table number sent as text', async () => {
    await page.goto(site.url('extract-tables.html'));
    assert.equal(
      await extracted({ name: 'extract', what: 'markdown' }),
      [
        '# Ledger',
        '## Orders',
        '| Order | Total |\n| --- | --- |\n| A-1 | 25 |\n| A-2 | 140 |',
        `[All orders](${site.url('extract-long.html')})`,
        'Table: Refunds',
        '| Order | Refunded | Reason |\n| --- | --- | --- |\n| A-2 | 40 | Scratched desk |',
        `[Refund policy](${site.url('run-article.html')})`,
      ].join('\n\n'),
    );
    assert.equal(await extracted({ name: 'extract', what: 'heading', selector: '#orders' }), 'Orders');
    assert.deepEqual(JSON.parse((await extracted({ name: 'extract', what: 'table', table: '2' }))!), [{ Order: 'A-2', Refunded: '40', Reason: 'Scratched desk' }]);
  });

  test('when an extraction names an element by its [index], then only that element is read', async () => {
    await page.goto(site.url('extract-tables.html'));
    const refund = (await observePage(browser, page)).elements.find((e) => e.text === 'Refund policy')!;
    assert.equal(await extracted({ name: 'extract', what: 'text', index: refund.index }), 'Refund policy');
    assert.deepEqual(JSON.parse((await extracted({ name: 'extract', what: 'links', index: refund.index }))!), [{ text: 'Refund policy', href: site.url('run-article.html') }]);
    await assert.rejects(extracted({ name: 'extract', what: 'table', index: refund.index }), (err: unknown) => err instanceof ActionError && err.message === 'There is no table there');
  });

  test('when a question spans parts of a long page, then each part is asked and the answers are combined in one more call', async () => {
    await page.goto(site.url('extract-long.html'));
    const asked: PageQuestion[] = [];
    const answer = await extracted({ name: 'extract', question: 'When was the lamp lit, and who kept it in the storm?' }, async (q) => {
      asked.push(q);
      if (q.partials) return q.partials.join(' / ');
      return q.part!.n === 1 ? /lamp was lit at (\w+)/.exec(q.markdown!)![1]! : /great storm was ([A-Z]\w+ [A-Z]\w+)/.exec(q.markdown!)![1]!;
    });
    assert.equal(answer, 'dusk / Grace Darling');
    assert.deepEqual(asked.map((q) => (q.partials ? 'combine' : `${q.part!.n}/${q.part!.of}`)), ['1/2', '2/2', 'combine']);
    assert.ok(asked.every((q) => q.url === site.url('extract-long.html') && (q.markdown ?? '').length <= 24000));
  });

  test('when no part of the page answers, then the extraction says so; a model without question calls is told what it can extract', async () => {
    await page.goto(site.url('extract-tables.html'));
    assert.equal(await extracted({ name: 'extract', question: 'What is the VAT number?' }, async () => 'NOT_FOUND'), 'The page does not answer "What is the VAT number?"');
    await assert.rejects(extracted({ name: 'extract', question: 'What is the VAT number?' }), (err: unknown) => err instanceof ActionError && /cannot answer questions about a page; extract the title, heading/.test(err.message));
  });

  test('when a text is looked for, then it is found in the page, in open shadow roots and in frames, each under its heading', async () => {
    await page.goto(site.url('extract-find.html'));
    assert.equal(
      await extracted({ name: 'find_text', text: 'the museum opens at' }),
      [
        '"the museum opens at" occurs 3 times on the page; scrolled to the first.',
        '1. under "Opening hours": The museum opens at nine on weekdays.',
        '2. under "Opening hours": On Sundays the museum opens at ten.',
        '3. under "Holidays": The museum opens at noon on holidays.',
      ].join('\n'),
    );
  });

  test('when markdown is split into parts, then parts break at blank lines and a block longer than a part is cut across parts', () => {
    assert.deepEqual(chunkMarkdown('aaaa\n\nbbbb\n\ncccc', 10), ['aaaa\n\nbbbb', 'cccc']);
    assert.deepEqual(chunkMarkdown('x'.repeat(25), 10), ['x'.repeat(10), 'x'.repeat(10), 'x'.repeat(5)]);
  });

  test('when long extractions are delivered, then each gets its own file and the notice names it; without a disk the cut is said', async () => {
    const disk = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-extract-'));
    try {
      const long = 'word '.repeat(2000);
      const first = await deliverExtract(long, 'text', disk);
      const second = await deliverExtract(long, 'text', disk);
      assert.deepEqual([savedExtractPath(first), savedExtractPath(second)], ['extracts/text-1.txt', 'extracts/text-2.txt']);
      assert.ok(first.length <= 4000);
      assert.equal(fs.readFileSync(path.join(disk, 'extracts/text-2.txt'), 'utf8'), long);
      assert.equal(await deliverExtract('short', 'text', disk), 'short');
    } finally {
      fs.rmSync(disk, { recursive: true, force: true });
    }
    const cut = await deliverExtract('x'.repeat(9000), 'text', undefined);
    assert.match(cut, /^The extraction is 9000 characters; this run has no disk to save it to, so only the first 3800 are shown:\nx{3800}…$/);
  });
});

