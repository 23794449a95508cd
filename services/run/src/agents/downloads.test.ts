/**
 * Files the browser downloads are the agent's: the model is told a file arrived (name, size,
 * type), reads it with read_download (CSV as a table, JSON, PDF text), the step says so, and the
 * file lands on the run's disk. Driven through the fake OpenAI-compatible server by a grounded
 * policy (it acts only on what the request shows, and sums amounts it read from the file) and by
 * the builtin model with its phrasings. The test Chromium saves downloads in a folder, as the
 * browser-pool does for a run's browser.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { folderDownloads, runLoop, startAgentHarness, type AgentHarness } from '../../../../test/support/agent-loop.js';
import { elementIndex, userText, type ChatRequest } from '../../../../test/support/fake-openai.js';
import { runBrowsercode } from './browsercode-agent.js';
import { parseInstruction } from './builtin-model.js';
import { MAX_READ_DOWNLOAD_BYTES, renderFile, RunDownloads, type DownloadSource } from './downloads.js';
import { ActionError } from './page-tools.js';
import { shellUser } from './shell.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../../../test/fixtures/site/reports');

let h: AgentHarness;
let tmp: string;

before(async () => {
  h = await startAgentHarness({ openaiModels: ['fake-gpt'], anthropicModels: [], timeoutMs: 1500 });
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'ats-downloads-'));
});
after(async () => {
  await h.close();
  await fs.rm(tmp, { recursive: true, force: true });
});
beforeEach(() => h.reset());

/** A run of the loop whose browser saves downloads in a fresh folder, with a disk of its own. */
async function run(task: string, model = 'fake-gpt') {
  const dir = await fs.mkdtemp(path.join(tmp, 'run-'));
  const diskDir = path.join(dir, 'disk');
  await fs.mkdir(diskDir);
  const downloads = await folderDownloads(h.browser, path.join(dir, 'browser-downloads'));
  const r = await runLoop({ browser: h.browser, model: h.models.create(model, task), task, diskDir, downloads, maxSteps: 10 });
  return { ...r, diskDir };
}

/** The names and sizes in the "Files the browser downloaded" line the model was sent. */
const downloadedLine = (req: ChatRequest) => /^Files the browser downloaded.*$/m.exec(userText(req))?.[0];

describe('downloads with an OpenAI-compatible model', () => {
  test('when the model downloads the March report, then it is told the file arrived, reads it as a table and answers the sum of its amounts', async () => {
    h.fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: h.site.url('reports.html') } };
      if (n === 1) return { tool: 'click', args: { index: elementIndex(req, /link "March report"/) } };
      const file = /\b(march[\w-]*\.csv) \(/.exec(downloadedLine(req) ?? '')?.[1];
      if (n === 2) return file ? { tool: 'read_download', args: { file } } : { tool: 'done', args: { result: 'no file arrived' } };
      // The amounts as the file's contents were sent: the last cell of each table row after the header.
      const text = userText(req);
      const rows = text.slice(text.search(/<<page-content \w+ from read_download result>>/)).split('\n').filter((l) => /^\|.*\|$/.test(l));
      const amounts = rows.slice(2).map((r) => Number(r.split('|').at(-2)!.trim()));
      return { tool: 'done', args: { result: `Total: ${amounts.reduce((a, b) => a + b, 0).toFixed(2)}` } };
    };
    const { result, steps, diskDir } = await run('Download the March report and sum its amounts');
    assert.equal(result, 'Total: 550.50');
    assert.equal(downloadedLine(h.fake.requests[2]!), 'Files the browser downloaded (read one with read_download): march-report.csv (165 bytes, text/csv)');
    assert.match(userText(h.fake.requests[2]!), /note: The browser downloaded march-report\.csv \(165 bytes, text\/csv\): read it with read_download; it is also on the run's disk as downloads\/march-report\.csv/);
    const sent = userText(h.fake.requests[3]!);
    assert.match(sent, /Step 3: read download "march-report\.csv" → [^\n]*\n  result → <<page-content (\w+) from read_download result>>\n[^]*<<end page-content \1>>/, 'the contents are fenced as page content');
    assert.match(sent, /\| 2025-03-03 \| Paper, A4 \(5 reams\) \| 120\.50 \|/, 'a quoted cell with a comma stays one cell');
    assert.equal(steps.length, 3);
    assert.match(steps[1]!.action, /^click \[\d+\] → downloaded march-report\.csv \(165 bytes, text\/csv\)$/);
    assert.equal(steps[2]!.action, 'read download "march-report.csv"');
    assert.deepEqual(steps[1]!.downloads, [{ name: 'march-report.csv', sizeBytes: 165, contentType: 'text/csv', diskPath: 'downloads/march-report.csv' }]);
    assert.deepEqual(await fs.readFile(path.join(diskDir, 'downloads/march-report.csv')), await fs.readFile(path.join(FIXTURES, 'march-report.csv')));
  });

  test('when the model opens an address the browser answers with a file, then the step is no error and the file is listed', async () => {
    h.fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: h.site.url('reports/february-report.csv') } };
      const file = /: ([\w-]+\.csv) \(/.exec(downloadedLine(req) ?? '')?.[1];
      return { tool: 'done', args: { result: file ?? 'nothing arrived' } };
    };
    const { result, steps } = await run('Open the February report file and say its name');
    assert.equal(result, 'february-report.csv');
    assert.doesNotMatch(userText(h.fake.requests[1]!), /FAILED|ERR_ABORTED/);
    assert.equal(steps[0]!.action, `navigate ${h.site.url('reports/february-report.csv')} → downloaded february-report.csv (71 bytes, text/csv)`);
  });

  test('when the model reads a file that was not downloaded, then it is told which files there are', async () => {
    h.fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: h.site.url('reports/february-report.csv') } };
      if (n === 1) return { tool: 'read_download', args: { file: 'april-report.csv' } };
      return { tool: 'done', args: { result: /FAILED: (.*)$/m.exec(userText(req))?.[1] ?? 'no error' } };
    };
    const { result } = await run('Read the April report');
    assert.equal(result, 'No download is named "april-report.csv"; the browser downloaded: february-report.csv');
  });
});

describe('downloads in browsercode', () => {
  test('when the model downloads a report, then it is on the disk at once, stored as an output, and a command sums its amounts', async () => {
    const dir = await fs.mkdtemp(path.join(tmp, 'code-'));
    const diskDir = path.join(dir, 'disk');
    await fs.mkdir(diskDir);
    await fs.chmod(dir, 0o755);
    await fs.chmod(diskDir, 0o777); // the terminal's user writes there
    const downloads = await folderDownloads(h.browser, path.join(dir, 'browser-downloads'));
    let stored = 0;
    let storedBeforeShell = -1;
    h.fake.script = (req, n) => {
      if (n === 0) return { tool: 'navigate', args: { url: h.site.url('reports.html') } };
      if (n === 1) return { tool: 'click', args: { index: elementIndex(req, /link "March report"/) } };
      const onDisk = /on the run's disk as (downloads\/[\w.-]+\.csv)/.exec(userText(req))?.[1];
      if (n === 2) return onDisk ? { tool: 'shell', args: { command: `awk -F, 'NR>1 {s+=$NF} END {printf "%.2f", s}' ${onDisk}` } } : { tool: 'done', args: { result: 'not on the disk' } };
      return { tool: 'done', args: { result: /result → <<page-content \w+ from shell result>>\n(\d+\.\d\d)/.exec(userText(req))?.[1] ?? 'no sum' } };
    };
    const result = await runBrowsercode({
      model: h.models.create('fake-gpt', 'x'),
      task: 'Download the March report and sum its amounts with a command',
      turns: [],
      diskDir,
      downloads,
      maxSteps: 10,
      deadline: Date.now() + 60000,
      actionTimeoutMs: 10000,
      signal: new AbortController().signal,
      terminal: { limits: { timeoutMs: 10000, maxOutputBytes: 1 << 20 }, user: shellUser(), sandbox: undefined },
      openBrowser: async () => h.browser,
      emit: async (type, data) => void (type === 'tool.call' && data.tool === 'shell' && (storedBeforeShell = stored)),
      syncOutputs: async () => {
        if (await fs.stat(path.join(diskDir, 'downloads/march-report.csv')).then(() => true, () => false)) stored++;
        return [];
      },
      recordStep: async () => {},
      recordUsage: async () => {},
    });
    assert.equal(result, '550.50');
    assert.equal(storedBeforeShell, 1, 'the outputs were synced as the file arrived, before any command');
  });
});

describe('downloads with the builtin model', () => {
  test('when told to click a PDF link and read the downloaded file, then the answer is the PDF text', async () => {
    const { result } = await run(`Open ${h.site.url('reports.html')}. Click 'March statement'. Read the downloaded file 'march-statement.pdf'.`, 'builtin');
    assert.equal(result, 'March statement\nOpening balance: 1,000.00\nClosing balance: 449.50\nAccount: ACME-0314');
  });

  test('when told to download the March summary and read the downloaded file, then the answer is its JSON, indented', async () => {
    const { result, steps } = await run(`Open ${h.site.url('reports.html')}. Download the March summary. Read the downloaded file.`, 'builtin');
    assert.deepEqual(JSON.parse(result), { month: '2025-03', entries: 4, total: 550.5, approvedBy: 'Dana Whitfield' });
    assert.match(result, /^\{\n {2}"month": "2025-03",/);
    assert.match(steps[1]!.action, /^click \[\d+\] → downloaded march-summary\.json \(76 bytes, application\/json\)$/);
  });

  test('when a task names downloads in the usual ways, then each parses to the action that does it', () => {
    assert.deepEqual(parseInstruction("Read the downloaded file 'report.csv'"), { kind: 'read_download', name: 'report.csv' });
    assert.deepEqual(parseInstruction('read the download "March 2025.pdf"'), { kind: 'read_download', name: 'March 2025.pdf' });
    assert.deepEqual(parseInstruction('Open the downloaded file'), { kind: 'read_download' });
    assert.deepEqual(parseInstruction('show me the file you just downloaded'), { kind: 'read_download' });
    assert.deepEqual(parseInstruction('Download the March report'), { kind: 'click', target: 'March report' });
    assert.deepEqual(parseInstruction("download 'Q1 export'"), { kind: 'click', target: 'Q1 export' });
    // What other phrasings meant before stays so.
    assert.deepEqual(parseInstruction('download the table'), { kind: 'extract', what: 'table' });
    assert.deepEqual(parseInstruction('read file notes.txt'), { kind: 'read_file', path: 'notes.txt' });
  });
});

describe('reading a downloaded file', () => {
  test('when a CSV has quoted cells, then each stays one cell of the table', async () => {
    const { text } = await renderFile('r.csv', Buffer.from('name,note\n"Lee, A.","said ""hi""\nthere"\n'));
    assert.equal(text, '| name | note |\n| --- | --- |\n| Lee, A. | said "hi" there |');
  });

  test('when a file is binary, then reading it says what it is instead of returning bytes', async () => {
    await assert.rejects(renderFile('photo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 13])), (err: Error) => {
      assert.ok(err instanceof ActionError);
      assert.equal(err.message, 'photo.png is a binary file (image/png, 8 bytes); read_download reads text, CSV, JSON and PDF files');
      return true;
    });
  });

  test('when a download is larger than the read limit, then it is refused without fetching it', async () => {
    let fetched = 0;
    const source: DownloadSource = {
      list: async () => [{ name: 'huge.csv', sizeBytes: MAX_READ_DOWNLOAD_BYTES + 1 }],
      read: async () => {
        fetched++;
        return Buffer.alloc(0);
      },
    };
    const files = new RunDownloads(source, undefined);
    await files.start();
    await assert.rejects(files.read('huge.csv'), /huge\.csv is 10\.0 MB, more than the 10\.0 MB read_download reads/);
    assert.equal(fetched, 0);
  });

  test('when a command made downloads/ a link out of the disk, then an arriving file is not written through it but still listed', async () => {
    const dir = await fs.mkdtemp(path.join(tmp, 'link-'));
    const outside = path.join(dir, 'outside');
    await fs.mkdir(path.join(dir, 'disk'), { recursive: true });
    await fs.mkdir(outside);
    await fs.symlink(outside, path.join(dir, 'disk', 'downloads'));
    let listed: { name: string; sizeBytes: number }[] = [];
    const files = new RunDownloads({ list: async () => listed, read: async () => Buffer.from('a,b\n') }, path.join(dir, 'disk'));
    await files.start();
    listed = [{ name: 'r.csv', sizeBytes: 4 }];
    assert.deepEqual(await files.arrived(), [{ name: 'r.csv', sizeBytes: 4, contentType: 'text/csv' }]);
    assert.deepEqual(await fs.readdir(outside), []);
  });

});
