/**
 * Acting on pages as real sites need it: a feed that scrolls in its own box and loads more on
 * scroll, a rich editor that keeps its own model (as Lexical does), key combinations, date and
 * range inputs, drag and drop in a sortable list and a scripted slider. Each is driven through
 * the fake OpenAI-compatible server by a grounded policy (it acts only on what the observation it
 * was sent shows), and the builtin model runs the same pages with its phrasings.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { Browser, Page } from 'puppeteer-core';
import { runLoop, startAgentHarness, type AgentHarness } from '../../../../test/support/agent-loop.js';
import { elementIndex, userText, type ChatRequest, type FakeOpenAI } from '../../../../test/support/fake-openai.js';
import type { TestSite } from '../../../../test/support/site.js';
import { runBrowserAction, type Action } from './actions.js';
import type { ModelRegistry } from './models.js';
import { observePage } from './observe.js';
import { ActionError, inputValue } from './page-tools.js';

let h: AgentHarness;
let site: TestSite;
let browser: Browser;
let fake: FakeOpenAI;
let models: ModelRegistry;

before(async () => {
  h = await startAgentHarness({ openaiModels: ['fake-gpt'], anthropicModels: [], timeoutMs: 5000 });
  ({ site, browser, fake, models } = h);
});
after(() => h.close());
beforeEach(() => h.reset());

const run = (task: string, model = 'fake-gpt') => runLoop({ browser, model: models.create(model, task), task, maxSteps: 15 });

/** The page part of what the model was sent (its only source of answers). */
const pageOf = (req: ChatRequest) => {
  const text = userText(req);
  return text.slice(text.lastIndexOf('Current page:'));
};
/** The first match of `pattern` in the page the model was shown. */
function read(req: ChatRequest, pattern: RegExp): RegExpExecArray {
  const m = pattern.exec(pageOf(req));
  if (!m) throw new Error(`${pattern} is not on the page the model was shown`);
  return m;
}
const opened = (req: ChatRequest, page: string) => pageOf(req).includes(page);

describe('acting on real-site widgets with an OpenAI-compatible model', () => {
  test('when the answer is in a chat feed that scrolls in its own box and loads more on scroll, then scrolling that box by its index reaches it', async () => {
    fake.script = (req, n) => {
      if (!opened(req, 'act-feed.html')) return { tool: 'navigate', args: { url: site.url('act-feed.html') } };
      const said = /Priya: [^\n]*/.exec(pageOf(req));
      if (said) return { tool: 'done', args: { result: said[0] } };
      // First as a model that knows only the window would; then the box the page state marks.
      if (n === 1) return { tool: 'scroll', args: { direction: 'down' } };
      return { tool: 'scroll', args: { direction: 'down', index: elementIndex(req, /scrollable "Messages"/) } };
    };
    const { result, steps } = await run('What did Priya say about the launch date in the team chat?');
    assert.equal(result, 'Priya: The launch moves to 9 April, after the security review.');
    assert.ok(steps.filter((s) => s.action.startsWith('scroll down [')).length >= 2, 'older messages were loaded twice');
    assert.match(pageOf(fake.requests[1]!), /\[\d+\] scrollable "Messages" scrollable: 0 px hidden above, \d+ px below/, 'the feed is marked with what it hides');
    assert.match(userText(fake.requests[2]!), /note: The page itself did not scroll[^\n]*giving its \[index\] \(marked "scrollable"\)/);
  });

  test('when a rich editor restores outside changes to its text, then typing replaces its text through input events and Control+K opens its menu', async () => {
    fake.script = (req) => {
      if (!opened(req, 'act-editor.html')) return { tool: 'navigate', args: { url: site.url('act-editor.html') } };
      const published = /Published: [^\n]*/.exec(pageOf(req));
      if (published) return { tool: 'done', args: { result: published[0] } };
      if (/menuitem "Publish update"/.test(pageOf(req))) return { tool: 'click', args: { index: elementIndex(req, /menuitem "Publish update"/) } };
      // The key is the one the page names.
      const key = read(req, /Press (\S+) to open the command menu/)[1]!;
      return {
        tools: [
          { tool: 'type', args: { index: elementIndex(req, /textbox "Update text"/), text: 'Shipping is delayed by two days' } },
          { tool: 'press', args: { key } },
        ],
      };
    };
    const { result } = await run('Replace the status update with "Shipping is delayed by two days" and publish it');
    assert.equal(result, 'Published: Shipping is delayed by two days');
  });

  test('when a form has a date field and a stepped slider, then the observation gives their formats and bounds, the values are set as the inputs take them, and a snapped value is reported', async () => {
    fake.script = (req) => {
      if (!opened(req, 'act-booking.html')) return { tool: 'navigate', args: { url: site.url('act-booking.html') } };
      const found = /Flights on [^\n]*/.exec(pageOf(req));
      if (found) return { tool: 'done', args: { result: found[0] } };
      const history = userText(req);
      const date = elementIndex(req, /textbox "Departure date"[^\n]*type=date format=YYYY-MM-DD/);
      const slider = read(req, /\[(\d+)\] slider "Max price \(EUR\)"[^\n]*type=range min=100 max=1000 step=(\d+)/);
      // The budget is 475; a slider in steps that cannot hold it is set to the step below.
      const snapped = /now holds "(\d+)", not "475"/.exec(history);
      if (!snapped) return { tools: [{ tool: 'type', args: { index: date, text: '2025-03-14' } }, { tool: 'type', args: { index: Number(slider[1]), text: '475' } }] };
      const under = Number(snapped[1]) > 475 ? Number(snapped[1]) - Number(slider[2]) : Number(snapped[1]);
      return { tools: [{ tool: 'select', args: { index: Number(slider[1]), option: String(under) } }, { tool: 'click', args: { index: elementIndex(req, /button "Search flights"/) } }] };
    };
    const { result } = await run('Find flights on 14 March 2025 for at most 475 EUR');
    assert.equal(result, 'Flights on 2025-03-14 up to 450 EUR: 3 found');
    assert.match(userText(fake.requests[2]!), /\[\d+\] now holds "500", not "475": the nearest value the slider allows \(min=100 max=1000 step=50\)/);
  });

  test('when tasks must be reordered by drag and drop and a slider moved by its thumb, then the drag action does both', async () => {
    fake.script = (req) => {
      if (!opened(req, 'act-sortable.html')) return { tool: 'navigate', args: { url: site.url('act-sortable.html') } };
      const order = read(req, /Order: [^\n]*/)[0];
      if (!order.startsWith('Order: Write the tests')) return { tool: 'drag', args: { index: elementIndex(req, /draggable "Write the tests"/), to: elementIndex(req, /draggable "Update the docs"/) } };
      const volume = Number(read(req, /slider "Alert volume" value="(\d+)"/)[1]);
      if (volume === 80) return { tool: 'done', args: { result: `${order}; ${read(req, /Alert volume: \d+/)[0]}` } };
      // A first drag to learn how far the thumb moves per pixel, then the rest of the way.
      const thumb = elementIndex(req, /slider "Alert volume"/);
      const first = /drag \[\d+\] by 90,0 px/.test(userText(req));
      return { tool: 'drag', args: { index: thumb, dx: first ? Math.round(((80 - volume) * 90) / (volume - 20)) : 90 } };
    };
    const { result, steps } = await run('Put "Write the tests" first on the sprint board and set the alert volume to 80');
    assert.equal(result, 'Order: Write the tests, Update the docs, Fix the login bug; Alert volume: 80');
    assert.deepEqual(steps.map((s) => s.action.split(' ')[0]), ['navigate', 'drag', 'drag', 'drag']);
  });
});

describe('the builtin model on real-site widgets', () => {
  test('when a task scrolls a panel, sets a date and a slider, types into a rich editor, presses Control+K and drags, then each phrasing acts on the page', async () => {
    const feed = await run(`Open ${site.url('act-feed.html')}. Scroll down the panel 'Messages'. Scroll down the panel 'Messages'. Is 'security review' on the page?`, 'builtin');
    assert.match(feed.result, /security review/);
    const booking = await run(`Open ${site.url('act-booking.html')}. Set the date field to 2025-03-14. Set 'Max price' to 450. Click 'Search flights'. Get the text of '#result'`, 'builtin');
    assert.equal(booking.result, 'Flights on 2025-03-14 up to 450 EUR: 3 found');
    const editor = await run(`Open ${site.url('act-editor.html')}. Type 'All good' into 'Update text'. Press Control+K. Click 'Publish update'. Get the text of '#out'`, 'builtin');
    assert.equal(editor.result, 'Published: All good');
    const board = await run(`Open ${site.url('act-sortable.html')}. Drag 'Fix the login bug' onto 'Update the docs'. Drag 'Alert volume' 60 px right. Get the text of '#order'. Get the text of '#level'`, 'builtin');
    assert.equal(board.result, 'Order: Fix the login bug, Update the docs, Write the tests\nAlert volume: 40');
  });

  test('when a panel becomes scrollable only once its first messages arrive, a second after the page loaded, then the builtin scrolls it then', async () => {
    // The page already says "messages" before it has any to scroll: waiting for that text alone looked again too soon.
    const feed = await run(`Open ${site.url('act-feed.html?delay=1000')}. Scroll down the panel 'Messages'. Scroll down the panel 'Messages'. Is 'security review' on the page?`, 'builtin');
    assert.match(feed.result, /security review/);
  });
});

describe('acting on widgets: bad input', () => {
  let page: Page;
  const act = (a: Action) => runBrowserAction(a, { browser, page, timeoutMs: 3000, signal: new AbortController().signal });
  before(async () => {
    page = await browser.newPage();
  });
  after(() => page.close());

  test('when a date, a slider value, a key, a drag or text for a drawn slider cannot be carried out as given, then the error says what is expected and the page is unchanged', async () => {
    await page.goto(site.url('act-booking.html'));
    const o = await observePage(browser, page);
    const date = o.elements.find((e) => e.label === 'Departure date')!.index;
    const slider = o.elements.find((e) => e.type === 'range')!.index;
    await assert.rejects(act({ name: 'type', index: date, text: '03/14/2025' }), (e: unknown) => e instanceof ActionError && /\[\d+\] is a date field: give the value as YYYY-MM-DD \(not "03\/14\/2025"\)/.test(e.message));
    await assert.rejects(act({ name: 'type', index: date, text: '2025-02-30' }), /does not take "2025-02-30"/);
    await assert.rejects(act({ name: 'select', index: slider, option: 'lots' }), /is a slider: give the value as a number/);
    await assert.rejects(act({ name: 'press', key: 'Hyper+A' }), /Unknown key combination "Hyper\+A"/);
    await assert.rejects(act({ name: 'press', key: 'Control+Blorp' }), /Unknown key "Blorp" in "Control\+Blorp"/);
    await assert.rejects(act({ name: 'drag', index: slider, to: date, dx: 5 }), /either "to" .* or an offset/);
    await assert.rejects(act({ name: 'drag', index: slider }), /either "to" .* or an offset/);
    assert.deepEqual(await page.evaluate(() => [(document.getElementById('depart') as HTMLInputElement).value, (document.getElementById('budget') as HTMLInputElement).value]), ['', '300']);
    await page.goto(site.url('act-sortable.html'));
    const thumb = (await observePage(browser, page)).elements.find((e) => e.role === 'slider')!.index;
    await assert.rejects(act({ name: 'type', index: thumb, text: '80' }), /is a slider the page draws itself and takes no typed value: drag its thumb/);
    assert.equal(await page.$eval('#level', (e) => e.textContent), 'Alert volume: 20');
  });

  test('when a date is written out, then the date input gets it as YYYY-MM-DD; a date past its max and text cut by maxlength are reported (a password never shown); Meta is Control on this browser', async () => {
    await page.goto(site.url('act-booking.html'));
    const o = await observePage(browser, page);
    const date = o.elements.find((e) => e.label === 'Departure date')!.index;
    assert.equal((await act({ name: 'type', index: date, text: '14 March 2025' })).note, undefined);
    assert.equal(await page.$eval('#depart', (e) => (e as HTMLInputElement).value), '2025-03-14');
    assert.match((await act({ name: 'type', index: date, text: '2027-01-05' })).note ?? '', /holds "2027-01-05", which is outside what the date field allows \(max=2026-12-31\)/);
    const promo = o.elements.find((e) => e.label === 'Promo code')!.index;
    assert.equal((await act({ name: 'type', index: promo, text: 'SPRING2025' })).note, `[${promo}] now holds "SPRING", not what was typed ("SPRING2025")`);
    const pin = o.elements.find((e) => e.label === 'Card PIN')!.index;
    assert.equal((await act({ name: 'type', index: pin, text: '123456' })).note, `[${pin}] now holds 4 characters, not the 6 typed`, 'a password is never repeated');
    await page.goto(site.url('act-editor.html'));
    assert.match((await act({ name: 'press', key: 'Meta+K' })).note ?? '', /pressed Control\+K: this browser is not a Mac's/);
    assert.equal(await page.$eval('#menu', (e) => (e as HTMLElement).hidden), false);
  });
});

test('when Shift+Tab, Tab and the space bar are pressed, then focus moves back and forth and the focused button submits (the browser stops at the empty required date)', async () => {
  const page = await browser.newPage();
  try {
    await page.goto(site.url('act-booking.html'));
    await page.focus('button[type=submit]');
    const act = (key: string) => runBrowserAction({ name: 'press', key }, { browser, page, timeoutMs: 3000, signal: new AbortController().signal });
    await act('Shift+Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'pin');
    await act('tab');
    await act(' ');
    // The form's required date is empty: the browser refuses the submit and focuses that field.
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'depart');
  } finally {
    await page.close();
  }
});

test('when values are given for inputs with a format, then each is put in the format its input takes, and what cannot be read as one is refused', () => {
  const cases: [string, string, string | undefined][] = [
    ['date', '2025-3-4', '2025-03-04'],
    ['date', 'March 14, 2025', '2025-03-14'],
    ['date', '03/04/2025', undefined],
    ['time', '2:30 pm', '14:30'],
    ['time', '12:05 a.m.', '00:05'],
    ['time', '25:00', undefined],
    ['datetime-local', '2025-03-14 09:15', '2025-03-14T09:15'],
    ['month', '2025-3', '2025-03'],
    ['week', '2025W7', '2025-W07'],
    ['color', '#ABC', '#aabbcc'],
    ['color', 'c0ffee', '#c0ffee'],
    ['color', 'teal', undefined],
    ['range', '47.5', '47.5'],
    ['range', 'half', undefined],
  ];
  for (const [type, text, want] of cases) assert.equal(inputValue(type, text), want, `${type} ${text}`);
});
