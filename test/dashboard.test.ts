/**
 * The dashboard as a user drives it: real Chromium (puppeteer-core) on the built dashboard that
 * the gateway serves, against one real stack. Sign-in (a wrong key too), a run with an attached
 * file whose steps arrive live, a follow-up, the finished run's screenshots, recording and
 * files, a stopped run, a browsercode terminal, a standalone browser, profiles, workspaces and
 * the overview's charts. Every page is photographed light and dark, at 1280 px and 390 px, into
 * .test-artifacts/dashboard/, and checked with axe-core; no page may break its CSP or throw.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser, type CDPSession, type Page } from 'puppeteer-core';
import { ROOT } from '../scripts/stack.js';
import { startClientHarness, type ClientHarness } from './support/client-harness.js';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.js';
import { tempDir } from './support/infra.js';
import { TEST_CHROMIUM_ARGS } from './support/test-chromium.js';

const ART = path.join(ROOT, '.test-artifacts', 'dashboard');
const DIST = path.join(ROOT, 'dashboard', 'dist');

/** The newest modification time under `p` (files only). */
function newest(p: string): number {
  if (!fs.existsSync(p)) return 0;
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((e) => newest(path.join(p, e))));
}

/** Builds the SDK and the dashboard unless the build is newer than their sources (make build did it). */
function ensureBuilt(): void {
  const sdk = path.join(ROOT, 'clients', 'typescript');
  const steps: [string, boolean][] = [
    ['clients/typescript', newest(path.join(sdk, 'src')) > newest(path.join(sdk, 'dist'))],
    ['dashboard', Math.max(newest(path.join(ROOT, 'dashboard', 'src')), newest(path.join(ROOT, 'dashboard', 'index.html')), newest(path.join(ROOT, 'dashboard', 'vite.config.ts')), newest(path.join(sdk, 'dist'))) > newest(path.join(DIST, 'index.html'))],
  ];
  let rebuilt = false;
  for (const [ws, stale] of steps) {
    if (!stale && !rebuilt) continue;
    const r = spawnSync('npm', ['run', 'build', '--silent', '-w', ws], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, `building ${ws}:\n${r.stdout}\n${r.stderr}`);
    rebuilt = true;
  }
}

interface Seen {
  csp: string[];
  errors: string[];
}

describe('dashboard', () => {
  let h: ClientHarness;
  let llm: FakeOpenAI;
  let browser: Browser;
  let page: Page;
  let base: string;
  let key: string;
  let site: (p: string) => string;
  let downloads: string;
  let cdp: CDPSession;
  const seen: Seen = { csp: [], errors: [] };
  const api = (p: string, init?: RequestInit) => h.fixture.api(p, init);

  before(async () => {
    ensureBuilt();
    fs.rmSync(ART, { recursive: true, force: true });
    fs.mkdirSync(ART, { recursive: true });
    // An LLM besides builtin: a scripted OpenAI-compatible fake with a price, so runs have tokens and cost.
    llm = await startFakeOpenAI();
    h = await startClientHarness({
      env: {
        DEFAULT_MODEL: 'builtin',
        OPENAI_BASE_URL: llm.baseUrl,
        OPENAI_MODELS: 'fake-gpt',
        MODEL_PRICES: JSON.stringify({ 'fake-gpt': { input: 3, output: 15 } }),
        MODEL_MAX_RETRIES: '0',
      },
    });
    key = h.fixture.key;
    site = (p) => h.site.url(p);
    // As a user opens it: the address make up prints.
    base = `http://localhost:${h.fixture.stack.gatewayPort}`;
    browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: TEST_CHROMIUM_ARGS });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    // tsx names functions with a helper (__name) that functions evaluated in the page need too.
    await page.evaluateOnNewDocument('globalThis.__name = (f) => f');
    await page.evaluateOnNewDocument(() => {
      document.addEventListener('securitypolicyviolation', (e) => {
        const w = window as unknown as { __csp?: string[] };
        (w.__csp ??= []).push(`${e.violatedDirective} ${e.blockedURI} on ${window.location.hash}: ${e.sample} (${e.sourceFile}:${e.lineNumber})`);
      });
    });
    page.on('pageerror', (err) => seen.errors.push(`pageerror: ${(err as Error).message}`));
    page.on('console', (m) => {
      // A refused key or a 409 while a recording is finished are answers the page shows, not faults.
      if (m.type() === 'error' && !/status of (401|404|409)/.test(m.text())) seen.errors.push(`console: ${m.text()}`);
    });
    downloads = tempDir('dashboard-downloads');
    cdp = await page.createCDPSession();
    // Downloads are saved under their guid, and their events say when one begins and completes.
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: downloads, eventsEnabled: true });
  });

  after(async () => {
    await browser?.close();
    await h?.stop();
    await llm?.close();
    if (downloads) fs.rmSync(downloads, { recursive: true, force: true });
  });

  /** The violations the page recorded since it loaded (collected before each navigation away). */
  async function collectCsp(): Promise<void> {
    const v = await page.evaluate(() => (window as unknown as { __csp?: string[] }).__csp ?? []).catch(() => []);
    seen.csp.push(...v);
    await page.evaluate(() => ((window as unknown as { __csp?: string[] }).__csp = [])).catch(() => undefined);
  }

  async function go(hash: string): Promise<void> {
    await collectCsp();
    await page.evaluate((h2) => (window.location.hash = h2), hash);
  }

  /** The next download the page makes: its suggested name and, once complete, its bytes. */
  function nextDownload(): Promise<{ name: string; bytes: Buffer }> {
    return new Promise((resolve, reject) => {
      let name = '';
      const begin = (e: { suggestedFilename: string }) => void (name = e.suggestedFilename);
      const progress = (e: { guid: string; state: string }) => {
        if (e.state === 'inProgress') return;
        cdp.off('Browser.downloadWillBegin', begin);
        cdp.off('Browser.downloadProgress', progress);
        if (e.state === 'completed') resolve({ name, bytes: fs.readFileSync(path.join(downloads, e.guid)) });
        else reject(new Error(`download ${e.state}`));
      };
      cdp.on('Browser.downloadWillBegin', begin);
      cdp.on('Browser.downloadProgress', progress);
    });
  }

  const text = (selector: string) => page.$eval(selector, (e) => (e as HTMLElement).innerText);

  test('when the dashboard is first opened, then it is small: under 45 KB on the wire (compressed page, script and styles)', async (t) => {
    // What crosses the wire, headers included, for every request of the first load.
    const sizes = new Map<string, { url: string; bytes: number; encoding: string }>();
    const received = (e: { requestId: string; response: { url: string; headers: Record<string, string> } }) =>
      void sizes.set(e.requestId, { url: e.response.url, bytes: 0, encoding: e.response.headers['content-encoding'] ?? e.response.headers['Content-Encoding'] ?? 'none' });
    const finished = (e: { requestId: string; encodedDataLength: number }) => {
      const r = sizes.get(e.requestId);
      if (r) r.bytes = e.encodedDataLength;
    };
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    cdp.on('Network.responseReceived', received);
    cdp.on('Network.loadingFinished', finished);
    const res = await page.goto(`${base}/`, { waitUntil: 'networkidle0' });
    await page.waitForSelector('#api-key');
    cdp.off('Network.responseReceived', received);
    cdp.off('Network.loadingFinished', finished);
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    assert.equal(res?.status(), 200);
    const loaded = [...sizes.values()];
    const total = loaded.reduce((a, r) => a + r.bytes, 0);
    fs.writeFileSync(path.join(ART, 'first-load.json'), JSON.stringify({ totalBytes: total, requests: loaded }, null, 2));
    t.diagnostic(`first load: ${(total / 1024).toFixed(1)} KB in ${loaded.length} requests (${loaded.map((r) => `${path.basename(new URL(r.url).pathname) || '/'} ${(r.bytes / 1024).toFixed(1)} KB ${r.encoding}`).join(', ')})`);
    for (const r of loaded.filter((x) => /\.(js|css)$/.test(x.url))) assert.match(r.encoding, /^(br|gzip)$/, `${r.url} is sent compressed`);
    assert.ok(total < 45 * 1024, `first load of ${total} bytes`);
  });

  test('when a wrong key is pasted, then the API’s detail is shown and nothing is kept', async () => {
    const res = await page.goto(`${base}/`);
    assert.equal(res?.status(), 200);
    assert.match(res!.headers()['content-security-policy']!, /frame-src http:\/\/localhost:\d+/);
    await page.type('#api-key', 'ats_wrong_key_000000000000000000000');
    await page.click('button[type=submit]');
    await page.waitForSelector('.notice-error');
    const shown = await text('.notice-error');
    assert.match(shown, /The API key was not accepted/);
    assert.match(shown, /Invalid or missing API key/);
    assert.match(shown, /HTTP 401/);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
  });

  test('when the right key is pasted, then the runs page opens and the key is kept in storage only, never in the address', async () => {
    await page.$eval('#api-key', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#api-key', key);
    await page.click('button[type=submit]');
    await page.waitForSelector('::-p-text(No runs yet.)');
    assert.equal(await page.evaluate(() => localStorage.getItem('ats.apiKey')), key);
    assert.ok(!page.url().includes(key));
    assert.equal(await text('h1'), 'Runs');
  });

  test('when only the keyboard is used, then Tab goes from "Skip to content" through the menu in order, and Enter opens a page with the focus on it', async () => {
    await page.reload();
    await page.waitForSelector('::-p-text(No runs yet.)');
    const focused = () => page.evaluate(() => (document.activeElement as HTMLElement | null)?.innerText.trim() ?? '');
    const order: string[] = [];
    for (let i = 0; i < 9; i++) {
      await page.keyboard.press('Tab');
      order.push(await focused());
    }
    assert.deepEqual(order, ['Skip to content', 'Agent Task Service', 'Overview', 'Runs', 'New run', 'Browsers', 'Profiles', 'Workspaces', 'Sign out']);
    for (let i = 0; i < 4; i++) await page.keyboard.down('Shift').then(() => page.keyboard.press('Tab')).then(() => page.keyboard.up('Shift'));
    assert.equal(await focused(), 'New run');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#task');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
    // From the page's top, the next Tab is the page's first control: the agent.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLInputElement).name), 'agent');
  });

  let runA = '';
  let runB = '';
  const CV = 'Ada Lovelace, analyst of engines';

  test('when a builtin run is started with an attached file, then its steps arrive live on the run page and the file reaches the page it was uploaded to', async () => {
    await go('#/runs/new');
    await page.waitForSelector('#task');
    await page.type('#task', `Open ${site('run-upload.html')}. Upload 'cv.txt' into 'Resume'. Wait for 'Received'. Extract the text of '#status'.`);
    // The models offered are the service's: builtin (the default here) and the configured LLM.
    const offered = (await (await api('/api/v1/models')).json()) as { models: { name: string; default: boolean }[] };
    assert.deepEqual(
      await page.$$eval('#model option', (os) => os.map((o) => o.textContent)),
      offered.models.map((m) => `${m.name}${m.default ? ' (default)' : ''}`),
    );
    assert.deepEqual(offered.models.map((m) => m.name), ['builtin', 'fake-gpt']);
    const file = path.join(downloads, 'cv.txt');
    fs.writeFileSync(file, `${CV}\n`);
    const input = await page.waitForSelector('#files');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
    await page.waitForSelector('::-p-text(cv.txt)');
    await page.click('button[type=submit]');
    await page.waitForFunction(() => /^#\/runs\/browser-agent\/run_/.test(window.location.hash), { timeout: 30000 });
    runA = decodeURIComponent(page.url().split('/').pop()!);
    await page.evaluate(() => {
      const w = window as unknown as { __seen: string[] };
      w.__seen = [];
      const note = () => {
        const steps = document.querySelectorAll('.timeline .step').length;
        const status = document.querySelector('.facts .badge')?.textContent ?? '';
        const last = `${steps} ${status}`;
        if (w.__seen.at(-1) !== last) w.__seen.push(last);
      };
      new MutationObserver(note).observe(document.body, { subtree: true, childList: true, characterData: true });
      note();
    });
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'completed' && document.querySelectorAll('.timeline .step').length === 4, { timeout: 60000 });
    const history = await page.evaluate(() => (window as unknown as { __seen: string[] }).__seen);
    // Steps were on the page before the run was shown completed: they came over the stream, live.
    assert.ok(history.some((h2) => /^[1-4] (queued|running)$/.test(h2)), history.join(' | '));
    assert.match(await text('.card .markdown, .card pre'), new RegExp(`Received cv.txt: ${CV}`));
    assert.deepEqual(
      await page.$$eval('.timeline .step-action', (els) => els.map((e) => (e as HTMLElement).innerText.replace(/^Step \d+: /, ''))).then((a) => a.length),
      4,
    );
    await page.waitForSelector('::-p-text(input · )');
    assert.match(await text('.run-side'), /cv\.txt/);
    await page.waitForSelector('.live-frame');
    await page.screenshot({ path: path.join(ART, 'run-live-view-desktop-light.png') });
  });

  test('when a follow-up is sent from the finished run, then it runs in the same session and browser', async () => {
    await page.waitForSelector('#follow-up');
    await page.type('#follow-up', 'Extract the title.');
    await page.click('.follow-up button[type=submit]');
    await page.waitForFunction((a) => /^#\/runs\/browser-agent\/run_/.test(window.location.hash) && !window.location.hash.endsWith(a), { timeout: 30000 }, runA);
    runB = decodeURIComponent(page.url().split('/').pop()!);
    await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Extract the title.' && document.querySelector('.facts .badge')?.textContent === 'completed', { timeout: 60000 });
    await page.waitForSelector('#result-h');
    const a = (await (await api(`/api/v1/agents/browser-agent/runs/${runA}`)).json()) as { sessionId: string; browserId: string };
    const b = (await (await api(`/api/v1/agents/browser-agent/runs/${runB}`)).json()) as { sessionId: string; browserId: string; result: string };
    assert.equal(b.sessionId, a.sessionId);
    assert.equal(b.browserId, a.browserId);
    assert.match(await text('.card .markdown, .card pre'), /Upload/);
    assert.ok(b.result.includes('Upload'));
  });

  test('when the finished run is opened and its browser stopped, then every step shows its screenshot, the recording plays and follows the step clicked', async () => {
    await go(`#/runs/browser-agent/${runA}`);
    await page.waitForFunction(() => document.querySelectorAll('.timeline .step').length === 4);
    // Every screenshot is an image that loaded (a real picture, not a broken link).
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('.step-shot img')].every((i) => i.complete && i.naturalWidth > 100), { timeout: 20000 });
    assert.equal(await page.$$eval('.step-shot img', (els) => els.length), 4);
    // Enlarged from the keyboard; Escape closes it and the focus is back on the thumbnail.
    await page.focus('.step:nth-child(2) .step-shot');
    await page.keyboard.press('Enter');
    await page.waitForSelector('dialog.image-dialog[open] img');
    assert.ok(await page.$eval('dialog.image-dialog img', (i) => (i as HTMLImageElement).naturalWidth > 300));
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.querySelector('dialog.image-dialog'));
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Enlarge the screenshot of step 2');

    // The browser is kept for follow-ups; stopping it ends the session and finishes the recording.
    await page.click('::-p-text(Stop the browser)');
    await page.click('::-p-text(Stop it now)');
    await page.waitForSelector('video.recording-video', { timeout: 60000 });
    await page.waitForFunction(() => (document.querySelector('video') as HTMLVideoElement).readyState >= 1, { timeout: 20000 });
    const duration = await page.$eval('video', (v) => (v as HTMLVideoElement).duration);
    assert.ok(duration > 1, `recording of ${duration} s`);
    const play = await page.$$('.step .step-meta button');
    assert.equal(play.length, 4, 'each step can be played from');
    const label = await play[2]!.evaluate((b) => b.getAttribute('aria-label')!);
    const [, min, sec] = /^Play from (\d+):(\d+) \(step 3\)$/.exec(label)!;
    const offset = Number(min) * 60 + Number(sec);
    await play[2]!.click();
    await page.waitForFunction((o) => { const v = document.querySelector('video') as HTMLVideoElement; return !v.paused && v.currentTime > o; }, { timeout: 20000 }, offset);
    assert.ok(await page.$eval('.step:nth-child(3)', (e) => e.getAttribute('aria-current') === 'step' || e.classList.contains('step-current')));
    const session = (await (await api(`/api/v1/agents/browser-agent/runs/${runA}`)).json()) as { sessionId: string };
    const ses = (await (await api(`/api/v1/agents/browser-agent/sessions/${session.sessionId}`)).json()) as { status: string };
    assert.equal(ses.status, 'closed');
    await page.$eval('video', (v) => (v as HTMLVideoElement).pause());
  });

  test('when a running run is stopped from its page, then it ends stopped', async () => {
    const created = (await (await api('/api/v1/agents/browser-agent/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: `Open ${site('run-table.html')}. Wait for 'a text that never appears'.`, model: 'builtin' }) })).json()) as { id: string };
    await go(`#/runs/browser-agent/${created.id}`);
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'running', { timeout: 60000 });
    await page.click('.page-actions .btn-danger');
    await page.click('::-p-text(Stop this run)');
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'stopped', { timeout: 30000 });
    const run = (await (await api(`/api/v1/agents/browser-agent/runs/${created.id}`)).json()) as { status: string };
    assert.equal(run.status, 'stopped');
    assert.equal(await page.$('.page-actions .btn-danger'), null, 'no Stop on an ended run');
  });

  let runD = '';
  test('when a browsercode run runs commands, then its terminal shows them with their colours, and its output file downloads', async () => {
    await go('#/runs/new?agent=browsercode');
    await page.waitForSelector('#task');
    await page.type('#task', "Run `printf '\\033[31mred alert\\033[0m and plain\\n'`. Run `echo 'made by the run' > out.txt`.");
    await page.click('button[type=submit]');
    await page.waitForFunction(() => /^#\/runs\/browsercode\/run_/.test(window.location.hash), { timeout: 30000 });
    runD = decodeURIComponent(page.url().split('/').pop()!);
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'completed', { timeout: 60000 });
    await page.waitForSelector('.terminal .xterm-rows');
    // The command is on a prompt line and its output is red where the program said so.
    await page.waitForFunction(() => /\$ printf/.test(document.querySelector('.terminal .xterm-rows')!.textContent!), { timeout: 10000 });
    const red = await page.$$eval('.terminal .xterm-rows span', (spans) => spans.filter((s) => s.classList.contains('xterm-fg-1')).map((s) => s.textContent).join(''));
    assert.match(red, /red alert/);
    assert.match(await text('.tool-uses'), /echo 'made by the run' > out\.txt/);
    const link = await page.waitForSelector('.files a::-p-text(out.txt)');
    const download = nextDownload();
    await link!.click();
    const got = await download;
    assert.equal(got.name, 'out.txt');
    assert.equal(got.bytes.toString(), 'made by the run\n');
  });

  test('when a run uses an LLM, then its Markdown answer is rendered without what could run or call out, with its cost and tokens', async () => {
    const answer = [
      '# Plans',
      '',
      'Found **2** plans on [the pricing page](https://example.com/pricing):',
      '',
      '| Plan | Price |',
      '|---|---|',
      '| Basic | $5 |',
      '| Pro | $15 |',
      '',
      '![chart](https://tracker.example/chart.png)',
      '',
      '<img src="https://tracker.example/pixel.gif" onerror="window.__pwned = 1">',
      '<script>window.__pwned = 2</script>',
    ].join('\n');
    llm.script = () => ({ tool: 'done', args: { result: answer }, usage: { prompt: 1200, completion: 300 } });
    await go('#/runs/new');
    await page.waitForSelector('#task');
    await page.type('#task', 'Find the plans on the pricing page.');
    await page.select('#model', 'fake-gpt');
    await page.click('button[type=submit]');
    await page.waitForFunction(() => /^#\/runs\/browser-agent\/run_/.test(window.location.hash) && document.querySelector('h1')?.textContent === 'Find the plans on the pricing page.', { timeout: 30000 });
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'completed', { timeout: 60000 });
    const md = await page.waitForSelector('.markdown h1');
    assert.equal(await md!.evaluate((e) => e.textContent), 'Plans');
    assert.deepEqual(await page.$$eval('.markdown table tr', (rows) => rows.map((r) => [...r.children].map((c) => c.textContent))), [
      ['Plan', 'Price'],
      ['Basic', '$5'],
      ['Pro', '$15'],
    ]);
    assert.deepEqual(
      await page.$$eval('.markdown a', (as) => as.map((a) => [a.textContent, a.getAttribute('href'), a.getAttribute('target'), a.getAttribute('rel')])),
      [
        ['the pricing page', 'https://example.com/pricing', '_blank', 'noopener noreferrer'],
        // An image is a link to it: nothing is fetched from the host the answer names.
        ['chart', 'https://tracker.example/chart.png', '_blank', 'noopener noreferrer'],
      ],
    );
    // HTML in the answer is shown as the text it is; nothing of it became markup or ran.
    assert.equal(await page.$$eval('.markdown img, .markdown script', (els) => els.length), 0);
    assert.match(await text('.markdown'), /<script>window\.__pwned = 2<\/script>/);
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    const facts = await page.$$eval('.facts > div', (ds) => Object.fromEntries(ds.map((d) => [d.querySelector('dt')!.textContent, d.querySelector('dd')!.textContent])));
    assert.equal(facts['Model'], 'fake-gpt');
    // 1,200 input tokens at $3 and 300 output tokens at $15 per million.
    assert.equal(facts['Cost'], '$0.0081');
    assert.equal(facts['Tokens'], '1.2k in · 300 out');
  });

  test('when the runs list is filtered, paged and changed elsewhere, then it shows just what the API holds, and follows the changes live', async () => {
    const list = async (agent: string, q = '') => ((await (await api(`/api/v1/agents/${agent}/runs?limit=200${q}`)).json()) as { items: { id: string; sessionId: string; status: string }[] }).items;
    const shownIds = () => page.$$eval('tr[data-run-id]', (rows) => rows.map((r) => (r as HTMLElement).dataset.runId!).sort());
    const rowsSettled = async (want: string[]) => {
      await page.waitForFunction((w) => JSON.stringify([...document.querySelectorAll('tr[data-run-id]')].map((r) => (r as HTMLElement).dataset.runId).sort()) === JSON.stringify(w), { timeout: 20000 }, [...want].sort());
    };
    await go('#/runs?agent=browsercode');
    await rowsSettled((await list('browsercode')).map((r) => r.id));
    assert.deepEqual(await page.$$eval('tr[data-run-id] td[data-label=Agent]', (tds) => [...new Set(tds.map((t) => t.textContent))]), ['browsercode']);
    await go('#/runs?status=stopped');
    const stopped = [...(await list('browser-agent', '&status=stopped')), ...(await list('browsercode', '&status=stopped'))].map((r) => r.id);
    assert.ok(stopped.length >= 1);
    await rowsSettled(stopped);
    const session = (await list('browser-agent')).find((r) => r.id === runA)!.sessionId;
    await go(`#/runs?session=${session}`);
    await rowsSettled([runA, runB]);
    assert.equal(await page.$eval('.filters input[name=session]', (i) => (i as HTMLInputElement).value), session);

    // Live: a run started elsewhere appears, and its status follows, without a reload.
    await go('#/runs');
    await page.waitForSelector('tr[data-run-id]');
    const created = (await (await api('/api/v1/agents/browser-agent/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: `Open ${site('run-table.html')}. Extract the table as JSON.`, model: 'builtin' }) })).json()) as { id: string };
    await page.waitForSelector(`tr[data-run-id="${created.id}"]`, { timeout: 20000 });
    await page.waitForFunction((id) => document.querySelector(`tr[data-run-id="${id}"] .badge`)?.textContent === 'completed', { timeout: 60000 }, created.id);
    // Its JSON answer is shown pretty-printed.
    await page.click(`tr[data-run-id="${created.id}"] td.task-cell a`);
    const json = await page.waitForSelector('pre.json code');
    const result = ((await (await api(`/api/v1/agents/browser-agent/runs/${created.id}`)).json()) as { result: string }).result;
    assert.equal(await json!.evaluate((e) => e.textContent), JSON.stringify(JSON.parse(result), null, 2));

    // Paged: more runs than a page (25) of one agent; "Show more" brings the rest, in order.
    await Promise.all(Array.from({ length: 26 }, (_, i) => api('/api/v1/agents/browsercode/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: `Summon a dragon number ${i}.`, model: 'builtin' }) })));
    await go('#/runs?agent=browsercode');
    await page.waitForSelector('::-p-text(Show more)', { timeout: 20000 });
    assert.equal((await shownIds()).length, 25);
    await page.click('::-p-text(Show more)');
    await rowsSettled((await list('browsercode')).map((r) => r.id));
    assert.equal(await page.$('::-p-text(Show more)'), null);
    await page.waitForFunction(() => [...document.querySelectorAll('tr[data-run-id] .badge')].filter((b) => b.textContent === 'failed').length === 26, { timeout: 60000 });
    const failed = await page.$eval('tr[data-run-id] td.task-cell a', (a) => a.getAttribute('href'));
    await go(failed!.slice(1));
    await page.waitForSelector('.run-error');
    assert.match(await text('.run-error'), /The builtin model cannot follow this step: "Summon a dragon number \d+\.?"/);
  });

  test('when a run that does not exist is opened, then the page says what the API said, not a blank page', async () => {
    await go('#/runs/browser-agent/run_doesnotexist000000000000');
    await page.waitForSelector('.notice-error');
    assert.match(await text('.notice-error'), /Run not found/);
    assert.match(await text('.notice-error'), /HTTP 404/);
  });

  /** The live view page embedded in this page (another one than `previous`), once it shows frames of the browser. */
  async function liveFrame(mode: 'view' | 'interactive', previous = '') {
    await page.waitForFunction((prev) => { const f = document.querySelector('iframe.live-frame') as HTMLIFrameElement | null; return f !== null && f.src.includes('token=') && f.src !== prev; }, { timeout: 30000 }, previous);
    const handle = await page.$('iframe.live-frame');
    const frame = (await handle!.contentFrame())!;
    await frame.waitForFunction((m) => document.body.dataset.state === 'live' && Number(document.body.dataset.frames) > 0 && document.getElementById('app')?.dataset.mode === m, { timeout: 30000 }, mode);
    return frame;
  }

  let standalone = '';
  test('when a browser is created on the Browsers page, then its CDP URL and snippets are shown, its live view plays, control can be taken, and Stop stops it', async () => {
    await go('#/browsers');
    await page.waitForSelector('::-p-text(Create browser)');
    await page.select('#b-size', '1024x768');
    await page.click('::-p-text(Create browser)');
    await page.waitForFunction(() => /^#\/browsers\/brw_/.test(window.location.hash), { timeout: 60000 });
    standalone = decodeURIComponent(page.url().split('/').pop()!);
    const cdpUrl = await (await page.waitForSelector('.copy-row input'))!.evaluate((i) => (i as HTMLInputElement).value);
    const record = (await (await api(`/api/v1/browsers/${standalone}`)).json()) as { cdpUrl: string; screenWidth: number; status: string };
    assert.equal(cdpUrl, record.cdpUrl);
    assert.equal(record.screenWidth, 1024);
    const snippets = await page.$$eval('.code-block code', (els) => els.map((e) => e.textContent ?? ''));
    assert.ok(snippets.some((c) => c.includes(`puppeteer.connect({ browserWSEndpoint: ${JSON.stringify(cdpUrl)} })`)));
    assert.ok(snippets.some((c) => c.includes(`chromium.connectOverCDP(${JSON.stringify(cdpUrl)})`)));
    // The snippet works as printed: a client drives the browser the page watches.
    const driven = await puppeteer.connect({ browserWSEndpoint: cdpUrl });
    const [tab] = await driven.pages();
    await tab!.goto(site('run-article.html'));
    await liveFrame('view');
    await page.screenshot({ path: path.join(ART, 'browser-live-desktop-light.png') });
    const watching = await page.$eval('iframe.live-frame', (f) => (f as HTMLIFrameElement).src);
    await page.click('::-p-text(Take control)');
    await liveFrame('interactive', watching);
    await driven.disconnect();
    await page.click('.page-actions .btn-danger');
    await page.click('::-p-text(Stop this browser)');
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'stopped', { timeout: 30000 });
    assert.equal(((await (await api(`/api/v1/browsers/${standalone}`)).json()) as { status: string }).status, 'stopped');
    await page.waitForSelector('video.recording-video, ::-p-text(The recording is being finished)', { timeout: 30000 });
  });

  test('when a profile is created, renamed and deleted, then the list follows each step and so does the API', async () => {
    await go('#/profiles');
    await page.waitForSelector('#profile-name');
    await page.type('#profile-name', 'Shop login');
    await page.click('::-p-text(Create profile)');
    const row = await page.waitForSelector('tr[data-profile-id] ::-p-text(Shop login)');
    const id = await row!.evaluate((e) => e.closest('tr')!.dataset.profileId!);
    await page.click(`tr[data-profile-id="${id}"] .renamable button`);
    const input = await page.waitForSelector(`tr[data-profile-id="${id}"] .rename input`);
    await input!.click({ count: 3 });
    await input!.type('Shop login (work)');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`tr[data-profile-id="${id}"] ::-p-text(Shop login (work))`);
    assert.equal(((await (await api(`/api/v1/browser-profiles/${id}`)).json()) as { name: string }).name, 'Shop login (work)');
    await page.click(`tr[data-profile-id="${id}"] .actions .btn-danger`);
    await page.click(`tr[data-profile-id="${id}"] ::-p-text(Delete Shop login (work))`);
    await page.waitForFunction((i) => !document.querySelector(`tr[data-profile-id="${i}"]`), {}, id);
    assert.equal((await api(`/api/v1/browser-profiles/${id}`)).status, 404);
  });

  let workspace = '';
  test('when a workspace is created, renamed, given a file and deleted, then each step shows and the file downloads', async () => {
    await go('#/workspaces');
    await page.waitForSelector('#ws-name');
    await page.type('#ws-name', 'Reports');
    await page.click('::-p-text(Create workspace)');
    const row = await page.waitForSelector('tr[data-workspace-id] ::-p-text(Reports)');
    workspace = await row!.evaluate((e) => e.closest('tr')!.dataset.workspaceId!);
    await page.click(`tr[data-workspace-id="${workspace}"] .renamable button`);
    const input = await page.waitForSelector(`tr[data-workspace-id="${workspace}"] .rename input`);
    await input!.click({ count: 3 });
    await input!.type('Quarterly reports');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`tr[data-workspace-id="${workspace}"] ::-p-text(Quarterly reports)`);
    assert.equal(((await (await api(`/api/v1/agent-workspaces/${workspace}`)).json()) as { name: string }).name, 'Quarterly reports');

    await page.click(`tr[data-workspace-id="${workspace}"] .actions a::-p-text(Files)`);
    await page.waitForSelector('#ws-files');
    const file = path.join(downloads, 'q3.csv');
    fs.writeFileSync(file, 'quarter,revenue\nq3,42\n');
    await ((await page.$('#ws-files')) as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
    await page.click('form button[type=submit]');
    const link = await page.waitForSelector('.files a::-p-text(q3.csv)', { timeout: 30000 });
    const download = nextDownload();
    await link!.click();
    assert.equal((await download).bytes.toString(), 'quarter,revenue\nq3,42\n');

    // Left in place for the page photographs; a second workspace is the one deleted.
    const doomed = (await (await api('/api/v1/agent-workspaces', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Scratch' }) })).json()) as { id: string };
    await go('#/workspaces');
    await page.waitForSelector(`tr[data-workspace-id="${doomed.id}"]`);
    await page.click(`tr[data-workspace-id="${doomed.id}"] .actions .btn-danger`);
    await page.click(`tr[data-workspace-id="${doomed.id}"] ::-p-text(Delete Scratch)`);
    await page.waitForFunction((i) => !document.querySelector(`tr[data-workspace-id="${i}"]`), {}, doomed.id);
    assert.equal((await api(`/api/v1/agent-workspaces/${doomed.id}`)).status, 404);
  });

  test('when the overview is opened, then its figures and charts come from the runs and browsers made', async () => {
    const runs = await Promise.all(['browser-agent', 'browsercode'].map(async (a) => ((await (await api(`/api/v1/agents/${a}/runs?limit=200`)).json()) as { items: { status: string }[] }).items));
    const all = runs.flat();
    const completed = all.filter((r) => r.status === 'completed').length;
    const failed = all.filter((r) => r.status === 'failed').length;
    await go('#/overview');
    await page.waitForSelector('.stats');
    const stats = await page.$$eval('.stat', (els) => Object.fromEntries(els.map((e) => [e.querySelector('dt')!.textContent, e.querySelector('.stat-value')!.textContent])));
    assert.equal(stats['Runs'], String(all.length));
    assert.equal(stats['Success rate'], `${Math.round((100 * completed) / (completed + failed))}%`);
    // Each chart is drawn (uPlot paints a canvas) and its numbers hold today's runs.
    await page.waitForFunction(() => document.querySelectorAll('.chart canvas').length === 4);
    const todays = await page.$$eval('.chart', (charts) => {
      const runsChart = charts.find((c) => c.querySelector('figcaption')!.textContent === 'Runs per day')!;
      const rows = [...runsChart.querySelectorAll('.chart-data tbody tr')];
      return [...rows.at(-1)!.querySelectorAll('td')].map((td) => Number(td.textContent));
    });
    assert.equal(todays.reduce((a, b) => a + b, 0), all.length);
    assert.equal(todays[0], completed);
    const minutes = await page.$$eval('.chart', (charts) => {
      const c = charts.find((x) => x.querySelector('figcaption')!.textContent === 'Browser-minutes per day')!;
      return Number([...c.querySelectorAll('.chart-data tbody tr')].at(-1)!.querySelector('td')!.textContent);
    });
    assert.ok(minutes > 0, 'the browsers of today count');
    const painted = await page.$$eval('.chart canvas', (cs) => cs.map((c) => { const ctx = (c as HTMLCanvasElement).getContext('2d')!; const d = ctx.getImageData(0, 0, (c as HTMLCanvasElement).width, (c as HTMLCanvasElement).height).data; let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]! > 0) n++; return n; }));
    assert.ok(painted.every((n) => n > 500), `pixels drawn per chart: ${painted.join(', ')}`);
    // Cost and tokens per model: the LLM's run, priced.
    const perModel = await page.$$eval('.chart', (charts) =>
      Object.fromEntries(
        charts
          .filter((c) => /per model/.test(c.querySelector('figcaption')!.textContent!))
          .map((c) => [c.querySelector('figcaption')!.textContent, [...c.querySelectorAll('.chart-data tbody tr')].map((r) => [...r.children].map((x) => x.textContent))]),
      ),
    );
    assert.deepEqual(perModel['Cost per model (USD)']![0], ['fake-gpt', '$0.0081']);
    assert.deepEqual(perModel['Tokens per model']![0], ['fake-gpt', '1.2k', '300']);
  });

  /** Two animation frames: the layout after a resize or a theme change is painted. */
  const painted = () => page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));

  /** axe-core's serious and critical violations on the page (the live view's cross-origin frame is its own page). */
  async function axeViolations(): Promise<string[]> {
    // Evaluated over CDP, which the page's CSP does not govern: nothing is injected as markup.
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(fs.readFileSync(path.join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8'));
    const violations = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe;
      const r = await axe.run(document, { iframes: false, resultTypes: ['violations'], runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
    });
    return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.targets.join(', ')}`);
  }

  test('when every page is looked at, light and dark, at 1280 px and 390 px, then axe finds nothing serious, and no page broke its CSP or threw', async () => {
    // A profile in use, so that the profiles page has one to show.
    await api('/api/v1/browser-profiles', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Personal', user_id: 'ada' }) });
    const pages: [string, string, string][] = [
      ['overview', '#/overview', '.chart canvas'],
      ['runs', '#/runs', '.runs-table'],
      ['run-browser-agent', `#/runs/browser-agent/${runA}`, '.recording-video'],
      ['run-browsercode', `#/runs/browsercode/${runD}`, '.terminal .xterm-rows'],
      ['new-run', '#/runs/new', '#task'],
      ['browsers', '#/browsers', 'table'],
      ['browser', `#/browsers/${standalone}`, '.recording-video'],
      ['profiles', '#/profiles', 'table'],
      ['workspaces', '#/workspaces', 'table'],
      ['workspace', `#/workspaces/${workspace}`, '.files'],
    ];
    /** The page as a person sees it once it settled: nothing loading, every picture loaded. */
    const settled = async (ready: string) => {
      await page.waitForSelector(ready, { timeout: 30000 });
      await page.waitForFunction(() => !document.querySelector('main .loading'), { timeout: 30000 });
      // Screenshots load lazily as they scroll into view; a full-page photograph needs them all now.
      await page.evaluate(() => Promise.all([...document.images].map((i) => ((i.loading = 'eager'), i.decode().catch(() => undefined)))));
      await page.waitForFunction(() => [...document.querySelectorAll('video')].every((v) => v.readyState >= 2), { timeout: 30000 });
      await painted();
    };
    const problems: string[] = [];
    for (const theme of ['light', 'dark'] as const) {
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: theme }]);
      for (const [name, hash, ready] of pages) {
        await page.setViewport({ width: 1280, height: 900 });
        await go(hash);
        await settled(ready);
        await page.screenshot({ path: path.join(ART, `${name}-desktop-${theme}.png`), fullPage: true });
        problems.push(...(await axeViolations()).map((v) => `${name} (${theme}): ${v}`));
        await page.setViewport({ width: 390, height: 844 });
        await painted();
        await page.screenshot({ path: path.join(ART, `${name}-phone-${theme}.png`), fullPage: true });
        if (theme === 'light') problems.push(...(await axeViolations()).map((v) => `${name} (phone): ${v}`));
      }
    }
    // The menu of a phone screen, opened.
    await page.click('.menu-button');
    await page.waitForSelector('nav.open');
    await page.screenshot({ path: path.join(ART, 'menu-phone-dark.png') });
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    await page.setViewport({ width: 1280, height: 900 });
    await collectCsp();
    assert.deepEqual(problems, []);
    assert.deepEqual(seen.csp, [], 'CSP violations');
    assert.deepEqual(seen.errors, [], 'errors in the page');
  });

  test('when the user signs out, then the key is gone from storage and the sign-in page is back', async () => {
    await page.click('.sign-out');
    await page.waitForSelector('#api-key');
    assert.equal(await page.evaluate(() => localStorage.getItem('ats.apiKey')), null);
    for (const theme of ['light', 'dark'] as const) {
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: theme }]);
      for (const [w, h2, label] of [[1280, 900, 'desktop'], [390, 844, 'phone']] as const) {
        await page.setViewport({ width: w, height: h2 });
        await painted();
        await page.screenshot({ path: path.join(ART, `sign-in-${label}-${theme}.png`), fullPage: true });
      }
      assert.deepEqual(await axeViolations(), []);
    }
  });
});
