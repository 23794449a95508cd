/** The agent loop with the builtin model in real Chromium, against pages the test serves. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'puppeteer-core';
import { launchTestChromium, runLoop } from '../../../../test/support/agent-loop.js';
import { serveSite, type TestSite } from '../../../../test/support/site.js';
import { BuiltinModel } from './builtin-model.js';
import { LimitReached } from './run-errors.js';
import { ModelError } from './model.js';

let site: TestSite;
let browser: Browser;
before(async () => {
  site = await serveSite();
  browser = await launchTestChromium();
});
after(async () => {
  await browser.close();
  await site.close();
});

async function run(task: string, opts: { maxSteps?: number; diskDir?: string; diskFiles?: string[] } = {}) {
  const { result, steps } = await runLoop({ browser, model: new BuiltinModel(task), task, ...opts });
  return { result, steps };
}

describe('browser-agent with the builtin model', () => {
  test('when told to fill and submit a form, then it answers with the confirmation text', async () => {
    const { result, steps } = await run(
      `Open ${site.url('run-form.html')}. Type 'Ada Lovelace' into 'Full name'. Type 'ada@example.com' into 'you@example.com'. Select 'Blue' from 'Colour'. Click 'Place order'. Wait for 'Thank you'. Extract the text of '#confirmation'.`,
    );
    assert.equal(result, 'Thank you, Ada Lovelace! A blue lamp is on its way to ada@example.com.');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'type', 'type', 'select', 'click', 'wait', 'extract']);
    assert.ok(steps.every((s, i) => s.number === i + 1 && s.screenshot && s.screenshot.length > 1000));
    assert.match(steps[4]!.url, /run-thanks\.html\?name=Ada/);
  });

  test('when told to extract a table, then the answer is the rows as JSON', async () => {
    const { result } = await run(`Go to ${site.url('run-table.html')}\nExtract the table as JSON`);
    assert.deepEqual(JSON.parse(result), [
      { Product: 'Lamp', Price: '25' },
      { Product: 'Desk', Price: '140' },
      { Product: 'Chair', Price: '60' },
    ]);
  });

  test('when told to follow a link and read the heading, then it answers with the heading', async () => {
    const { result, steps } = await run(`Open ${site.url('run-links.html')}. Click the link 'The engine'. Read the heading.`);
    assert.equal(result, 'The Analytical Engine');
    assert.match(steps[1]!.url, /run-article\.html$/);
  });

  test('when asked about the current page after an earlier step and in a follow-up turn, then it answers from the page the browser shows', async () => {
    const first = await run(`Open ${site.url('run-links.html')}. Click the link 'The engine'. What is the main heading of the current page?`);
    assert.equal(first.result, 'The Analytical Engine');
    // The follow-up turn: the session's browser still shows the article; nothing is opened again.
    const task = 'And the URL of the page?';
    const { result, steps } = await runLoop({ browser, model: new BuiltinModel(task), task, turns: [{ task: 'the first turn', result: first.result }] });
    assert.equal(result, site.url('run-article.html'));
    assert.deepEqual(steps.map((s) => s.action), ['extract url']);
    assert.match(steps[0]!.url, /run-article\.html$/);
  });

  test('when told to upload a disk file, then the page receives it', async () => {
    const disk = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-disk-'));
    fs.writeFileSync(path.join(disk, 'cv.txt'), 'Ada, engineer');
    try {
      const { result } = await run(`Open ${site.url('run-upload.html')}. Upload 'cv.txt' into 'Resume'. Wait for 'Received'. Extract the text of '#status'.`, { diskDir: disk, diskFiles: ['cv.txt'] });
      assert.equal(result, 'Received cv.txt: Ada, engineer');
    } finally {
      fs.rmSync(disk, { recursive: true, force: true });
    }
  });

  test('when an element never appears, then the run fails naming it', async () => {
    await assert.rejects(run(`Open ${site.url('run-table.html')}. Click 'Buy now'.`), (err: unknown) => err instanceof ModelError && /No element matching "Buy now"/.test(err.message));
  });

  test('when the step limit is reached, then the run fails saying so', async () => {
    await assert.rejects(run(`Open ${site.url('run-table.html')}. Scroll down. Scroll up. Extract the title.`, { maxSteps: 2 }), (err: unknown) => err instanceof LimitReached && /Step limit reached: 2 steps/.test(err.message));
  });

  test('when a page has two tables and the second is asked for by caption or number, then the answer is its rows', async () => {
    const expected = [{ Order: 'A-2', Refunded: '40', Reason: 'Scratched desk' }];
    assert.deepEqual(JSON.parse((await run(`Open ${site.url('extract-tables.html')} and extract the table 'Refunds'`)).result), expected);
    assert.deepEqual(JSON.parse((await run(`Open ${site.url('extract-tables.html')}, then get the second table as JSON`)).result), expected);
    assert.deepEqual(JSON.parse((await run(`Open ${site.url('extract-tables.html')}. Extract the orders table as JSON.`)).result), [
      { Order: 'A-1', Total: '25' },
      { Order: 'A-2', Total: '140' },
    ]);
  });

  test('when a table that is not there is asked for, then the run fails listing the tables the page has', async () => {
    await assert.rejects(run(`Open ${site.url('extract-tables.html')}. Extract the table 'Plans'.`), (err: unknown) => /No table is named "Plans": the page has 2 \(1: "Orders", 2: "Refunds"\)/.test((err as Error).message));
  });

  test('when links are asked for within a selector, then only the links there are listed', async () => {
    const { result } = await run(`Open ${site.url('extract-tables.html')}. List the links in '#refunds'.`);
    assert.deepEqual(JSON.parse(result), [{ text: 'Refund policy', href: site.url('run-article.html') }]);
  });

  test('when an extraction is longer than can be shown, then it is saved whole on the disk and the result says where', async () => {
    const disk = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-disk-'));
    try {
      const { result } = await run(`What is the page text of ${site.url('extract-long.html')}?`, { diskDir: disk });
      assert.match(result, /^The extraction is \d+ characters, too long to show here: it is saved in full on the run's disk as extracts\/text-1\.txt\. It begins:\nLighthouse log\n+Entry 1:/);
      assert.ok(result.length <= 4000, `the result is ${result.length} characters`);
      const saved = fs.readFileSync(path.join(disk, 'extracts/text-1.txt'), 'utf8');
      assert.match(saved, /Entry 300: .*\n[\s\S]*The keeper on duty in the great storm was Grace Darling\.$/);
    } finally {
      fs.rmSync(disk, { recursive: true, force: true });
    }
  });

  test('when a text is looked for, then the answer says where it occurs and the page is scrolled to it', async () => {
    const { result } = await run(`Open ${site.url('extract-long.html')}. Find 'grace darling' on the page.`);
    assert.equal(result, '"grace darling" occurs 1 time on the page; scrolled to the first.\n1. under "Appendix": The keeper on duty in the great storm was Grace Darling.');
    const pages = await browser.pages();
    const scrolled = await pages[pages.length - 1]!.evaluate(() => {
      const p = Array.from(document.querySelectorAll('p')).at(-1)!.getBoundingClientRect();
      return p.top >= 0 && p.bottom <= innerHeight && scrollY > 0;
    });
    assert.ok(scrolled, 'the appendix is on screen');
    const missing = await run(`Open ${site.url('extract-long.html')}. Find 'Atlantis'.`);
    assert.equal(missing.result, '"Atlantis" does not occur on the page');
  });

  test('when the task is a question about a page, then it opens the page and answers; "the first link" is followed', async () => {
    assert.equal((await run(`What is the title of ${site.url('extract-tables.html')}?`)).result, 'Shop ledger');
    const { result, steps } = await run(`Open ${site.url('extract-tables.html')}, click the first link and tell me the heading`);
    assert.equal(result, 'Lighthouse log');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'click', 'extract']);
  });
});

