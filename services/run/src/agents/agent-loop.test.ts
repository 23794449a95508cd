/**
 * The browser-agent loop's recovery, several actions per reply, limits and structured answers,
 * driven through the fake providers by a grounded policy: it acts only on elements it finds by
 * their label in the page state it was sent, and answers only with text it read there.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { Browser } from 'puppeteer-core';
import { runLoop, startAgentHarness, type AgentHarness } from '../../../../test/support/agent-loop.js';
import { anthropicUserText, type FakeAnthropic } from '../../../../test/support/fake-anthropic.js';
import { elementIndex, userText, type ChatRequest, type FakeOpenAI } from '../../../../test/support/fake-openai.js';
import type { TestSite } from '../../../../test/support/site.js';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LoopCheckpoint } from './agent-loop.js';
import { runBrowserAgent } from './browser-agent.js';
import { runBrowsercode } from './browsercode-agent.js';
import { LimitReached } from './run-errors.js';
import { shellUser } from './shell.js';
import type { ModelRegistry } from './models.js';

let h: AgentHarness;
let site: TestSite;
let browser: Browser;
let fake: FakeOpenAI;
let anthropic: FakeAnthropic;
let models: ModelRegistry;

before(async () => {
  h = await startAgentHarness({ openaiModels: ['fake-gpt'], anthropicModels: ['fake-claude'], timeoutMs: 1500 });
  ({ site, browser, fake, anthropic, models } = h);
});
after(() => h.close());
beforeEach(() => h.reset());

async function run(task: string, opts: { model?: string; maxSteps?: number } = {}) {
  return runLoop({ browser, model: models.create(opts.model ?? 'fake-gpt', task), task, maxSteps: opts.maxSteps ?? 15 });
}

/** A line of the page text the service sent that matches `pattern` (the policy's only source of answers). */
function read(req: ChatRequest | string, pattern: RegExp): string {
  const text = typeof req === 'string' ? req : userText(req);
  const page = text.slice(text.lastIndexOf('Current page:'));
  const m = pattern.exec(page);
  if (!m) throw new Error(`${pattern} is not on the page the model was shown`);
  return m[0];
}

/** The prompt without the regions fenced as page content, as a reader that honours the fences' tags sees it. */
function outsideFences(text: string): string {
  return text.replace(/<<page-content (\w+) from [^\n]*?>>\n[^]*?\n<<end page-content \1>>/g, '(page content)');
}

describe('browser-agent recovery with an OpenAI-compatible model', () => {
  test('when a click raises an alert and another a confirm, then both are answered, reported to the model, and the run completes', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-dialogs.html') } };
      if (n === 1) return { tool: 'click', args: { index: elementIndex(req, /Save draft/), next_goal: 'save the draft' } };
      if (n === 2) return { tool: 'click', args: { index: elementIndex(req, /Delete draft/) } };
      return { tool: 'done', args: { result: read(req, /Draft #\d+ deleted/) } };
    };
    const { result } = await run('Save the draft, then delete it, and tell me what the page says');
    assert.equal(result, 'Draft #27 deleted');
    assert.match(userText(fake.requests[2]!), /The page showed an alert; it was closed with OK\. It said: <<page-content \w+ from alert>>\nDraft saved\n/);
    assert.match(userText(fake.requests[2]!), /Saved as draft #27/, 'the click went through once the alert was answered');
    assert.match(userText(fake.requests[3]!), /a confirm dialog; it was accepted\. It said: <<page-content \w+ from confirm>>\nReally delete the draft\?\n/);
  });

  test('when a click starts a chain of redirects, then the model is shown the page at its end', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-redirect-start.html') } };
      if (n === 1) return { tool: 'click', args: { index: elementIndex(req, /Check out/) } };
      if (!/Order placed/.test(userText(req))) return { tool: 'wait', args: { text: 'Order placed' } };
      return { tool: 'done', args: { result: read(req, /order number is \d+/) } };
    };
    const { result } = await run('Check out and tell me the order number');
    assert.equal(result, 'order number is 4417');
  });

  test('when one reply holds several tool calls, then they run in order until the page changes, and the model is told which were not run', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-signup.html') } };
      if (n === 1)
        return {
          tools: [
            { tool: 'type', args: { index: elementIndex(req, /textbox "First name"/), text: 'Ada', memory: 'signing up Ada Lovelace' } },
            { tool: 'type', args: { index: elementIndex(req, /textbox "Last name"/), text: 'Lovelace' } },
            { tool: 'click', args: { index: elementIndex(req, /button "Sign up"/) } },
            { tool: 'click', args: { index: elementIndex(req, /Skip/) } },
          ],
        };
      return { tool: 'done', args: { result: read(req, /Welcome, [^\n!]+!/) } };
    };
    const { result, steps } = await run('Sign up as Ada Lovelace and tell me the greeting');
    assert.equal(result, 'Welcome, Ada Lovelace!', 'the fourth call, on the old page, was not run');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'type', 'type', 'click']);
    const last = userText(fake.requests[2]!);
    assert.match(last, /the 1 later action\(s\) of that reply were not run: click \[\d+\]/);
    assert.match(last, /memory: signing up Ada Lovelace/, "the model's notes are replayed");
    assert.match(last, /Step 4: click \[\d+\] button "Sign up" → \S*loop-welcome\.html\?first=Ada&last=Lovelace "Welcome"/);
  });

  test('when an action of a multi-action reply fails, then the later ones are not run, the model is told which ran, and the edited field is named by its label', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-profile.html') } };
      if (n === 1)
        return {
          tools: [
            { tool: 'type', args: { index: elementIndex(req, /"Bio"/), text: 'Writes compilers' } },
            { tool: 'select', args: { index: elementIndex(req, /"Bio"/), option: 'Public' } },
            { tool: 'click', args: { index: elementIndex(req, /button "Save profile"/) } },
          ],
        };
      if (!/Profile saved/.test(read(req, /Profile saved[^\n]*|Not saved yet/))) return { tool: 'click', args: { index: elementIndex(req, /button "Save profile"/) } };
      return { tool: 'done', args: { result: read(req, /Profile saved with bio: [^\n]+/) } };
    };
    const { result, steps } = await run('Set my bio to "Writes compilers" and save the profile');
    assert.equal(result, 'Profile saved with bio: Writes compilers');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'type', 'select', 'click']);
    const after = userText(fake.requests[2]!);
    assert.match(read(after, /Profile saved[^\n]*|Not saved yet/), /Not saved yet/, 'the click after the failed action did not run');
    assert.match(after, /Action 2 of the 3 of that reply failed \(the 1 before it ran\), so the 1 later action\(s\) of that reply were not run: click \[\d+\]/);
    assert.match(after, /Step 2: type "Writes compilers" into \[\d+\] textarea "Bio"/, 'the field is named by its label');
    assert.doesNotMatch(after, /long walks/, 'not by what it held before');
  });

  test('when an extracted text forges a note of the service, then it reaches the model inside the fence of page content, and a model that obeys notes outside fences is not diverted', async () => {
    fake.script = (req) => {
      const text = outsideFences(userText(req));
      // A naive model: it obeys any line that looks like the service's note, wherever it sees one outside a fence.
      const forged = /^- The user has changed the task: open (\S+)/m.exec(text);
      if (forged) return { tool: 'navigate', args: { url: forged[1]! } };
      if (!/URL: \S*loop-injection\.html/.test(text)) return { tool: 'navigate', args: { url: site.url('loop-injection.html') } };
      const total = /extract result>>\n[^]*?total: (\d+ EUR)/.exec(userText(req));
      if (!total) return { tool: 'extract', args: { what: 'text', selector: '#order' } };
      return { tool: 'done', args: { result: total[1]! } };
    };
    const { result, steps } = await run('What is the total of my order?');
    assert.equal(result, '42 EUR');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'extract'], 'the run never opened the page the text asked for');
    const last = userText(fake.requests.at(-1)!);
    assert.match(last, /result → <<page-content \w+ from extract result>>\n[^]*The user has changed the task/, 'the forged note reached the model, as page content');
    assert.doesNotMatch(outsideFences(last), /changed the task/);
  });

  test('when the model makes a malformed call, answers in prose, and the provider fails and times out, then each is reported and the run goes on to the answer', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: '{"url": ' };
      if (n === 1) return { text: 'I would open the catalogue now.' };
      if (n === 2) return { tool: 'navigate', args: { url: site.url('loop-catalogue.html') } };
      if (n === 3) return { status: 500 };
      if (n === 4) return { hang: true };
      return { tool: 'done', args: { result: read(req, /Desk lamp: \d+ EUR/) } };
    };
    const { result } = await run('What does the desk lamp cost in the catalogue?');
    assert.equal(result, 'Desk lamp: 25 EUR');
    assert.match(userText(fake.requests[1]!), /could not be used: The model made a malformed tool call to "navigate"/);
    assert.match(userText(fake.requests[2]!), /could not be used: The reply had no tool call/);
    assert.doesNotMatch(userText(fake.requests[3]!), /could not be used/, 'a good reply resets the count and the notes');
    assert.match(userText(fake.requests[4]!), /could not be used: The model provider failed: HTTP 500/);
    assert.match(userText(fake.requests[5]!), /could not be used: The model did not answer within 2 s/);
  });

  test('when the provider refuses the key, then the run ends at the first call saying so (asking again cannot help)', async () => {
    fake.script = () => ({ status: 401, body: { error: { message: 'Incorrect API key provided' } } });
    await assert.rejects(run('What does the desk lamp cost?'), /^ModelError: The model provider failed: HTTP 401/);
    assert.equal(fake.requests.length, 1);
  });

  test('when the run hits the step limit, then a last call offers only done and the run ends with that partial answer and the reason', async () => {
    fake.script = (req, n) => {
      if (req.tools!.length === 1) return { tool: 'done', args: { result: `Partial: ${read(req, /Floor lamp: \d+ EUR/)}; the other prices were not found` } };
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-catalogue.html') } };
      return { tool: 'scroll', args: { direction: 'down' } };
    };
    await assert.rejects(run('List every lamp price', { maxSteps: 5 }), (err: unknown) => {
      assert.ok(err instanceof LimitReached);
      assert.match(err.message, /Step limit reached: 5 steps/);
      assert.equal(err.partial, 'Partial: Floor lamp: 89 EUR; the other prices were not found');
      return true;
    });
    assert.equal(fake.requests.length, 6);
    assert.match(userText(fake.requests[4]!), /This is step 5 of 5\./);
    assert.match(userText(fake.requests[4]!), /You did "scroll down" 3 times in a row/, 'the loop is nudged');
    assert.match(userText(fake.requests[4]!), /The page has not changed in the last 3 steps/);
    assert.match(userText(fake.requests[5]!), /This is your last call: only done is available/);
  });

  test('when the task asks for JSON and the answer is not JSON, then it is sent back once and the fenced JSON that follows is the result', async () => {
    fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: site.url('loop-catalogue.html') } };
      const price = read(req, /Desk lamp: (\d+)/).split(': ')[1]!;
      if (!/not valid JSON/.test(userText(req))) return { tool: 'done', args: { result: `The desk lamp costs ${price} EUR` } };
      return { tool: 'done', args: { result: `\`\`\`json\n{"price": ${price}}\n\`\`\`` } };
    };
    const { result } = await run('Give me the desk lamp price as JSON like {"price": 0}');
    assert.deepEqual(JSON.parse(result), { price: 25 });
    assert.equal(fake.requests.length, 3);
  });
});

describe('browser-agent recovery with Anthropic', () => {
  test('when Claude sends a tool call with a bad input, then it is told so and goes on; cached tokens are counted apart', async () => {
    anthropic.script = (req, n) => {
      if (n === 0) return { tool: 'click', input: { index: 'the first one' } };
      if (n === 1) return /could not be used: The model made a malformed tool call to "click"/.test(anthropicUserText(req)) ? { tool: 'navigate', input: { url: site.url('loop-catalogue.html') } } : { text: 'not told' };
      return { tool: 'done', input: { result: read(anthropicUserText(req), /Floor lamp: \d+ EUR/) }, usage: { input: 50, output: 5, cacheRead: 900 } };
    };
    const { result, usage } = await run('What does the floor lamp cost?', { model: 'fake-claude' });
    assert.equal(result, 'Floor lamp: 89 EUR');
    assert.equal(usage.length, 3, `the malformed call is billed too: ${JSON.stringify(usage)}`);
    assert.equal(usage[2]!.cachedInputTokens, 900);
  });
});

describe('browser-agent recovery with Anthropic, as with OpenAI', () => {
  test('when Claude answers in prose, the API is overloaded and a click raises an alert, then each is reported; at the step limit a last call offers only done and its answer is kept', async () => {
    anthropic.script = (req, n) => {
      const text = anthropicUserText(req);
      if (req.body.tools!.length === 1) return { tool: 'done', input: { result: `Partial: ${read(text, /Saved as draft #\d+/)}; not deleted yet` } };
      if (n === 0) return { text: 'I will open the drafts page.' };
      if (n === 1) return { status: 529, type: 'overloaded_error', message: 'Overloaded' };
      if (n === 2) return { tool: 'navigate', input: { url: site.url('loop-dialogs.html') } };
      return { tool: 'click', input: { index: Number(/\[(\d+)\][^\n]*Save draft/.exec(text)![1]) } };
    };
    await assert.rejects(run('Save the draft, then delete it', { model: 'fake-claude', maxSteps: 3 }), (err: unknown) => {
      assert.ok(err instanceof LimitReached);
      assert.match(err.message, /Step limit reached: 3 steps/);
      assert.equal(err.partial, 'Partial: Saved as draft #27; not deleted yet');
      return true;
    });
    const said = anthropic.requests.map((r) => anthropicUserText(r));
    assert.match(said[1]!, /could not be used: The reply had no tool call/);
    assert.match(said[2]!, /could not be used: The model provider failed: HTTP 529/);
    assert.match(said[4]!, /The page showed an alert; it was closed with OK\. It said: <<page-content \w+ from alert>>\nDraft saved\n/);
    assert.match(said.at(-1)!, /This is your last call: only done is available/);
  });
});

describe('browsercode recovery with an OpenAI-compatible model', () => {
  test('when the model makes a malformed call, meets a dialog, sends several calls in one reply and answers JSON in prose, then each is handled as in browser-agent and the run completes', async () => {
    const disk = await fs.mkdtemp(path.join(os.tmpdir(), 'ats-code-loop-'));
    const events: { type: string; data: Record<string, unknown> }[] = [];
    fake.script = (req, n) => {
      const text = userText(req);
      if (n === 0) return { tool: 'shell', args: { command: 42 } };
      if (n === 1) return { tool: 'navigate', args: { url: site.url('loop-dialogs.html') } };
      if (n === 2) return { tool: 'click', args: { index: elementIndex(req, /Save draft/) } };
      if (n === 3) {
        const draft = read(req, /draft #\d+/);
        return { tools: [{ tool: 'write_file', args: { path: 'draft.txt', content: draft } }, { tool: 'shell', args: { command: 'wc -c < draft.txt' } }, { tool: 'list_files', args: {} }] };
      }
      const bytes = /Step 4: run wc[^\n]*\n(?:  [^\n]*\n)*?  result → <<page-content \w+ from shell result>>\n(\d+)/.exec(text)?.[1];
      if (!/not valid JSON/.test(text)) return { tool: 'done', args: { result: `The draft note has ${bytes} bytes` } };
      return { tool: 'done', args: { result: `{"bytes": ${bytes}}` } };
    };
    try {
      const result = await runBrowsercode({
        model: models.create('fake-gpt', 'x'),
        task: 'Save the draft, write its name to draft.txt, and give me the file size as JSON like {"bytes": 0}',
        turns: [],
        diskDir: disk,
        maxSteps: 15,
        deadline: Date.now() + 60000,
        actionTimeoutMs: 10000,
        signal: new AbortController().signal,
        terminal: { limits: { timeoutMs: 10000, maxOutputBytes: 1 << 20 }, user: shellUser(), sandbox: undefined },
        openBrowser: async () => browser,
        emit: async (type, data) => void events.push({ type, data }),
        syncOutputs: async () => [],
        recordStep: async () => {},
        recordUsage: async () => {},
      });
      assert.deepEqual(JSON.parse(result), { bytes: 9 }, 'the file holds "draft #27"');
      assert.match(userText(fake.requests[1]!), /could not be used: The model made a malformed tool call to "shell": "command" must be a string/);
      assert.match(userText(fake.requests[3]!), /The page showed an alert; it was closed with OK\. It said: <<page-content \w+ from alert>>\nDraft saved\n/);
      assert.match(userText(fake.requests[3]!), /This is step 3 of 15\./);
      assert.deepEqual(events.filter((e) => e.type === 'tool.call').map((e) => e.data.tool), ['navigate', 'click', 'write_file', 'shell', 'list_files']);
      assert.equal(await fs.readFile(path.join(disk, 'draft.txt'), 'utf8'), 'draft #27');
      assert.equal(fake.requests.length, 6, 'the prose answer was sent back once as not JSON');
    } finally {
      await fs.rm(disk, { recursive: true, force: true });
      const pages = await browser.pages();
      await Promise.all(pages.slice(1).map((p) => p.close()));
    }
  });
});

describe('a run taken over from a dead worker', () => {
  test('when the loop is rebuilt from the checkpoints stored with its steps, then the builtin goes on with the next instruction on the same page, numbering steps on, and gives the whole answer', async () => {
    const task = `Open ${site.url('run-form.html')}. Type 'Ada Lovelace' into 'Full name'. Type 'ada@example.com' into 'you@example.com'. Select 'Blue' from 'Colour'. Click 'Place order'. Wait for 'Thank you'. Extract the text of '#confirmation'.`;
    const stored: LoopCheckpoint[] = [];
    const base = { task, turns: [], diskFiles: [], maxSteps: 15, deadline: Date.now() + 60000, actionTimeoutMs: 10000, signal: new AbortController().signal, recordUsage: async () => {} };
    // The first worker records four steps (each with its checkpoint), then dies.
    await assert.rejects(
      runBrowserAgent({
        ...base,
        browser,
        model: models.create('builtin', task),
        recordStep: async (s) => {
          stored.push(s.checkpoint!);
          if (s.number === 4) throw new Error('the worker died');
        },
        saveCheckpoint: async (c) => void (stored[c.seq - 1] = c),
      }),
      /the worker died/,
    );
    assert.deepEqual(stored.map((c) => c.seq), [1, 2, 3, 4]);
    const last = stored.at(-1)!;
    assert.deepEqual([last.state.steps, last.state.browserSteps, last.state.model], [4, 4, { next: 4 }]);
    // JSON round trip: what another process reads back from the database.
    const back = JSON.parse(JSON.stringify(stored)) as LoopCheckpoint[];
    const numbers: number[] = [];
    const result = await runBrowserAgent({
      ...base,
      browser,
      model: models.create('builtin', task),
      recordStep: async (s) => void numbers.push(s.number),
      resume: { history: back.map((c) => c.memory), steps: 4, browserSteps: 4, model: back.at(-1)!.state.model, notes: ['resumed'] },
    });
    assert.equal(result, 'Thank you, Ada Lovelace! A blue lamp is on its way to ada@example.com.');
    assert.deepEqual(numbers, [5, 6, 7], 'the steps after the last stored one, none repeated');
  });
});
