/**
 * What the model sees of a page, driven through the real loop, an LLM model and a fake
 * OpenAI-compatible server whose scripted policy is grounded: it acts only on elements it finds
 * by their visible label in the page text the service sent, and answers only with text found there.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { Browser } from 'puppeteer-core';
import { runLoop, startAgentHarness, type AgentHarness } from '../../../../test/support/agent-loop.js';
import { anthropicUserText, type FakeAnthropic } from '../../../../test/support/fake-anthropic.js';
import { elementIndex, userText, type ChatRequest, type FakeOpenAI, type FakeReply } from '../../../../test/support/fake-openai.js';
import type { TestSite } from '../../../../test/support/site.js';
import type { ModelRegistry } from './models.js';
import { observePage } from './observe.js';

let h: AgentHarness;
let site: TestSite;
let browser: Browser;
let fake: FakeOpenAI;
let anthropic: FakeAnthropic;
let models: ModelRegistry;

before(async () => {
  h = await startAgentHarness({ openaiModels: ['fake-gpt', 'fake-gpt-vision'], anthropicModels: ['claude-text', 'claude-vision'], visionModels: ['fake-gpt-vision', 'claude-vision'], timeoutMs: 10000 });
  ({ site, browser, fake, anthropic, models } = h);
});
after(() => h.close());
beforeEach(() => h.reset());

async function run(task: string, model = 'fake-gpt', maxSteps = 12) {
  const page = await browser.newPage();
  try {
    await page.bringToFront();
    const { result, usage } = await runLoop({ browser, model: models.create(model, task), task, maxSteps });
    return { result, usage };
  } finally {
    await page.close();
  }
}

/** The text matching `re` in the page the service sent (group 1 if any); throws when absent. */
function seen(req: ChatRequest, re: RegExp): string {
  const m = re.exec(userText(req));
  if (!m) throw new Error(`${re} is not in the observation`);
  return m[1] ?? m[0];
}
const has = (req: ChatRequest, re: RegExp) => re.test(userText(req));
/** The grounded policy's first move on any page: open the fixture when the observation is not of it yet. */
const opened = (req: ChatRequest, page: string) => has(req, new RegExp(`URL: \\S*${page.replace('.', '\\.')}`));

describe('the observation through the loop', () => {
  test('when the button is inside a shadow root, then the model can press it and read what it reveals', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-shadow.html')) return { tool: 'navigate', args: { url: site.url('obs-shadow.html') } };
      if (!has(req, /Your coupon is/)) return { tool: 'click', args: { index: elementIndex(req, /button "Reveal coupon"/) } };
      return { tool: 'done', args: { result: seen(req, /Your coupon is (\S+)/) } };
    };
    assert.equal((await run('Get my coupon from the gift shop')).result, 'SHADOW-42');
  });

  test('when a field and buttons are inside closed shadow roots (one within another), then the model sees them, types, clicks and reads what they reveal', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-closed-shadow.html')) return { tool: 'navigate', args: { url: site.url('obs-closed-shadow.html') } };
      if (!has(req, /textbox "Name on the pass" value="Ada"/)) return { tool: 'type', args: { index: elementIndex(req, /textbox "Name on the pass"/), text: 'Ada' } };
      if (!has(req, /Stamped|Pass for/)) return { tool: 'click', args: { index: elementIndex(req, /button "Stamp the pass"/) } };
      if (!has(req, /Pass for/)) return { tool: 'click', args: { index: elementIndex(req, /button "Show pass"/) } };
      return { tool: 'done', args: { result: seen(req, /(Pass for \S+ \S+)/) } };
    };
    assert.equal((await run('Stamp my pass in the member lounge as Ada and tell me the pass')).result, 'Pass for Ada: CLOSED-77');
  });

  test('when forms are inside a same-origin and a cross-origin iframe, then the model fills both and reads their answers', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-frames.html')) return { tool: 'navigate', args: { url: site.url('obs-frames.html') } };
      if (!has(req, /textbox "Voucher code" value="SPRING"/)) return { tool: 'type', args: { index: elementIndex(req, /textbox "Voucher code"/), text: 'SPRING' } };
      if (!has(req, /redeemed on/)) return { tool: 'click', args: { index: elementIndex(req, /button "Redeem voucher"/) } };
      if (!has(req, /textbox "Member name" value="Ada"/)) return { tool: 'type', args: { index: elementIndex(req, /textbox "Member name"/), text: 'Ada' } };
      if (!has(req, /joined on/)) return { tool: 'click', args: { index: elementIndex(req, /button "Join the club"/) } };
      return { tool: 'done', args: { result: `${seen(req, /(Voucher \S+ redeemed on \S+)/)}; ${seen(req, /(Welcome \S+ joined on \S+)/)}` } };
    };
    const { result } = await run('Redeem voucher SPRING and join the club as Ada');
    assert.equal(result, 'Voucher SPRING redeemed on 127.0.0.1; Welcome Ada, joined on localhost');
    assert.ok(fake.requests.some((r) => has(r, /--- iframe http:\/\/localhost:\d+\/obs-frame-member\.html ---/)), 'the cross-origin frame is shown with its address');
  });

  test('when the page has a custom combobox, then the model opens it, picks an option and sees the choice', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-combobox.html')) return { tool: 'navigate', args: { url: site.url('obs-combobox.html') } };
      if (!has(req, /costs/)) {
        if (has(req, /combobox "Destination".* collapsed/)) return { tool: 'click', args: { index: elementIndex(req, /combobox "Destination"/) } };
        return { tool: 'click', args: { index: elementIndex(req, /option "Peru"/) } };
      }
      return { tool: 'done', args: { result: `${seen(req, /combobox "Destination" value="([^"]+)"/)}: ${seen(req, /(Shipping to \S+ costs \d+ EUR)/)}` } };
    };
    assert.equal((await run('Ship to Peru and tell me the cost')).result, 'Peru: Shipping to Peru costs 12 EUR');
    assert.ok(fake.requests.some((r) => has(r, /\*\[\d+\] option "Peru"/)), 'the options that appeared are marked new');
  });

  test('when controls have state, then the model reads checked, selected, disabled and what it typed — never a password', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-state.html')) return { tool: 'navigate', args: { url: site.url('obs-state.html') } };
      if (!has(req, /textbox "Nickname" value=/)) return { tool: 'type', args: { index: elementIndex(req, /textbox "Nickname"/), text: 'Zed' } };
      const state = (re: RegExp) => seen(req, re);
      return {
        tool: 'done',
        args: {
          result: [
            `newsletter ${state(/checkbox "Newsletter" (checked|unchecked)/)}`,
            `adverts ${state(/checkbox "Adverts" (checked|unchecked)/)}`,
            `plan ${state(/combobox "Plan" selected="([^"]+)"/)}`,
            `delete ${has(req, /button "Delete account" disabled/) ? 'disabled' : 'enabled'}`,
            `save ${has(req, /button "Save" disabled/) ? 'disabled' : 'enabled'}`,
            `nickname ${state(/textbox "Nickname" value="([^"]*)"/)}`,
            `referral ${state(/textbox "Referral code" (value="[^"]*" required readonly)/)}`,
            `postcode ${state(/textbox "Postcode" value="[^"]*" (invalid)/)}`,
            `dark mode ${state(/switch "Dark mode" (checked)/)}`,
            `bio ${state(/textbox "Bio" value="([^"]*)"/)}`,
            `shortcuts ${state(/\[\d+\] (focusable) "Keyboard shortcuts"/)}`,
            `more options ${state(/button "More options" (collapsed|expanded)/)}`,
          ].join(', '),
        },
      };
    };
    const { result } = await run('Set my nickname to Zed and tell me the settings');
    assert.equal(
      result,
      'newsletter checked, adverts unchecked, plan Pro, delete disabled, save enabled, nickname Zed, referral value="REF-9" required readonly, postcode invalid, dark mode checked, bio Loves lamps, shortcuts focusable, more options collapsed',
    );
    assert.ok(!fake.requests.some((r) => JSON.stringify(r).includes('hunter2')), 'the password never reaches the model');
  });

  test('when a click renders its results bit by bit without network traffic, then the next observation shows them all', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-progressive.html')) return { tool: 'navigate', args: { url: site.url('obs-progressive.html') } };
      if (!has(req, /Result 1/)) return { tool: 'click', args: { index: elementIndex(req, /button "Show results"/) } };
      const last = [...userText(req).matchAll(/Result \d+/g)].at(-1)![0];
      return { tool: 'done', args: { result: has(req, /All \d+ results shown/) ? seen(req, /(All \d+ results shown)/) : `only up to ${last}` } };
    };
    assert.equal((await run('Show the results')).result, 'All 8 results shown');
    assert.equal(fake.requests.length, 3, 'no wait was needed');
  });

  test('when a click starts a chain of redirects, then the model reads the page at its end', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-redirect')) return { tool: 'navigate', args: { url: site.url('obs-redirect.html') } };
      if (has(req, /link "Continue with SSO"/)) return { tool: 'click', args: { index: elementIndex(req, /link "Continue with SSO"/) } };
      if (!has(req, /session number is \d+/)) return { tool: 'wait', args: { text: 'session number' } };
      return { tool: 'done', args: { result: seen(req, /session number is (\d+)/) } };
    };
    assert.equal((await run('Sign in with SSO and tell me the session number')).result, '8812');
  });

  test('when a banner covers the page, then the button under it is marked covered until the banner is dismissed', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-overlay.html')) return { tool: 'navigate', args: { url: site.url('obs-overlay.html') } };
      if (has(req, /button "Buy the lamp" covered/)) return { tool: 'click', args: { index: elementIndex(req, /button "Accept cookies"/) } };
      if (!has(req, /Order \d+ placed/)) return { tool: 'click', args: { index: elementIndex(req, /button "Buy the lamp"/) } };
      return { tool: 'done', args: { result: seen(req, /(Order \d+ placed)/) } };
    };
    assert.equal((await run('Buy the lamp')).result, 'Order 5521 placed');
    assert.deepEqual(
      fake.requests.slice(1).map((r) => /button "Buy the lamp"( covered)?/.exec(userText(r))?.[1] ?? 'uncovered'),
      [' covered', 'uncovered', 'uncovered'],
    );
  });

  test('when the fact is only at the bottom of a long page, then scrolling brings it into the observation', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-long.html')) return { tool: 'navigate', args: { url: site.url('obs-long.html') } };
      if (!has(req, /vault code is \d+/)) return { tool: 'scroll', args: { direction: 'down' } };
      return { tool: 'done', args: { result: seen(req, /vault code is (\d+)/) } };
    };
    assert.equal((await run('What is the vault code in the annual report?', 'fake-gpt', 20)).result, '7316');
    const first = fake.requests[1]!;
    assert.match(userText(first), /0 pages above, [\d.]+ pages below/);
    assert.match(userText(first), /lines below, scroll down to see them/);
    assert.ok(fake.requests.length > 4, 'the fact took several scrolls to reach');
  });

  test('when a page has 3,000 links and 40 kB of text, then every request stays within 60,000 characters and the last link is reached by scrolling', async () => {
    fake.script = (req): FakeReply => {
      if (!opened(req, 'obs-big.html')) return { tool: 'navigate', args: { url: site.url('obs-big.html') } };
      if (!has(req, /link "Entry number 3000"/)) return { tool: 'scroll', args: { direction: 'bottom' } };
      return { tool: 'done', args: { result: seen(req, /link "Entry number (3000)"/) } };
    };
    assert.equal((await run('What is the last entry of the directory?')).result, '3000');
    assert.equal(fake.requests.length, 3, 'blank tab, top of the directory, its bottom');
    assert.doesNotMatch(userText(fake.requests[1]!), /Entry number 3000/, 'the top of the page does not show the last link');
    assert.match(userText(fake.requests[2]!), /pages above, 0 pages below/);
    for (const r of fake.requests) {
      const size = JSON.stringify(r.messages).length + JSON.stringify(r.tools).length;
      assert.ok(size <= 60000, `a request carries ${size} characters`);
    }
  });
});

describe('the observation on its own', () => {
  test('when the page is larger than the budget, then the lines nearest the viewport are kept and the cut is said', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(site.url('obs-big.html'));
      await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight / 2));
      const o = await observePage(browser, page, { budget: 1500 });
      assert.ok(o.text.length <= 1500, `${o.text.length} characters`);
      assert.match(o.text, /^\(scrolled to \d+ of \d+ px; [\d.]+ pages above, [\d.]+ pages below\)/);
      assert.match(o.text, /… \(\d+ lines cut to fit the budget; scroll to bring them nearer\)/);
      assert.equal(o.elements.length, 3000, 'every link stays indexed for actions');
    } finally {
      await page.close();
    }
  });
});

describe('vision', () => {
  const twoSteps = (req: ChatRequest, n: number): FakeReply =>
    n === 0 ? { tool: 'navigate', args: { url: site.url('obs-state.html') } } : { tool: 'done', args: { result: seen(req, /Title: (.+)/) }, usage: { prompt: 1700, completion: 5 } };
  const imageParts = (r: ChatRequest) => r.messages.flatMap((m) => (Array.isArray(m.content) ? (m.content as { type: string; image_url?: { url: string } }[]) : [])).filter((p) => p.type === 'image_url');

  test('when an OpenAI-compatible model is listed as image-capable, then each step carries a JPEG of the viewport and its reported tokens are counted', async () => {
    fake.script = twoSteps;
    const { result, usage } = await run('Which page is this?', 'fake-gpt-vision');
    assert.equal(result, 'Settings');
    const images = imageParts(fake.requests[1]!);
    assert.equal(images.length, 1);
    assert.match(images[0]!.image_url!.url, /^data:image\/jpeg;base64,\/9j\//);
    assert.ok(images[0]!.image_url!.url.length > 2000);
    assert.match(userText(fake.requests[1]!), /checkbox "Newsletter" checked/, 'the text observation still comes with it');
    assert.equal(usage.reduce((a, u) => a + u.inputTokens, 0), 100 + 1700);
  });

  test('when an OpenAI-compatible model is not listed, then no image is sent', async () => {
    fake.script = twoSteps;
    assert.equal((await run('Which page is this?', 'fake-gpt')).result, 'Settings');
    assert.deepEqual(fake.requests.map(imageParts).flat(), []);
  });

  test('when an Anthropic model is listed as image-capable, then it gets an image block and one that is not gets none', async () => {
    anthropic.script = (req, n) =>
      n % 2 === 0 ? { tool: 'navigate', input: { url: site.url('obs-state.html') } } : { tool: 'done', input: { result: /Title: (.+)/.exec(anthropicUserText(req))![1]! } };
    const blocks = () =>
      anthropic.requests.map((r) => r.body.messages.flatMap((m) => (Array.isArray(m.content) ? (m.content as { type: string; source?: { type: string; media_type: string; data: string } }[]) : [])).filter((b) => b.type === 'image'));
    assert.equal((await run('Which page is this?', 'claude-vision')).result, 'Settings');
    const sent = blocks();
    assert.equal(sent[1]!.length, 1);
    assert.equal(sent[1]![0]!.source!.type, 'base64');
    assert.equal(sent[1]![0]!.source!.media_type, 'image/jpeg');
    assert.match(sent[1]![0]!.source!.data, /^\/9j\//);
    anthropic.requests.length = 0;
    assert.equal((await run('Which page is this?', 'claude-text')).result, 'Settings');
    assert.deepEqual(blocks().flat(), []);
  });
});
