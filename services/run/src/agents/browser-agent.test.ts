/** The agent loop with the builtin model in real Chromium, against pages the test serves. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser } from 'puppeteer-core';
import { serveSite, type TestSite } from '../../../../test/support/site.js';
import { BuiltinModel } from './builtin-model.js';
import { LimitReached, runBrowserAgent, type RecordedStep } from './browser-agent.js';
import { ModelError } from './model.js';

let site: TestSite;
let browser: Browser;
before(async () => {
  site = await serveSite();
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
});
after(async () => {
  await browser.close();
  await site.close();
});

async function run(task: string, opts: { maxSteps?: number; diskDir?: string; diskFiles?: string[] } = {}) {
  const steps: RecordedStep[] = [];
  const result = await runBrowserAgent({
    browser,
    model: new BuiltinModel(task),
    task,
    turns: [],
    diskDir: opts.diskDir,
    diskFiles: opts.diskFiles ?? [],
    maxSteps: opts.maxSteps ?? 50,
    deadline: Date.now() + 60000,
    actionTimeoutMs: 10000,
    signal: new AbortController().signal,
    recordStep: async (s) => void steps.push(s),
    recordUsage: async () => {},
  });
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
});
