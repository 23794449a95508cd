/**
 * The READMEs' shell examples run as written against a real stack, so the docs cannot drift, and
 * every example task of `GET /agents` completes with the builtin model.
 *
 * Which blocks run (test/support/readme-examples.ts): a fenced block in `sh`, `bash` or `shell`
 * runs, unless `no-run` follows the language (```` ```sh no-run ````: a cluster, `make up` itself,
 * a command that needs the service stopped). Other languages are shown only. The runnable blocks of
 * one README run in order in one bash session, as typed into one terminal (`KEY`, `API`, `ID`
 * carry over), with `set -Eeuo pipefail`; a `curl` whose reply has an HTTP status of 400 or more
 * fails, unless the line after it shows an error body (`# {"detail": …}`). A line `# {…}` or
 * `# […]` after a command is its expected output, JSON where `…` elides: inside a string any
 * text, as a value any value, as an array's last element more elements, as an object member more
 * members.
 *
 * The only changes to what a README says are mechanical:
 * - `http://localhost:8080` is the test stack's gateway; `localhost:8081`, `:8082` and `:9222` its
 *   file, live view and CDP edges;
 * - `https://example.com/…`, `http://example.com/…` and a bare `example.com` are
 *   test/fixtures/site/example.com/ served on 127.0.0.1 (a stand-in page: the test has no internet);
 * - the working directory is a scratch folder holding `data/local-api-key` (the stack's key), a
 *   `notes.txt` to upload, and a link to every other top-level entry of the checkout;
 * - the environment is a fresh terminal's: PATH, HOME, LANG (no `KEY`, `BROWSER` … of the caller).
 *
 * To test another README, add its path to READMES; one that does not exist yet is skipped.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT } from '../scripts/stack.js';
import { tempDir } from './support/infra.js';
import { checkOutput, describeFailure, fencedBlocks, mismatch, parseExpected, pidNamespace, runReadme } from './support/readme-examples.js';
import { serveSite, type TestSite } from './support/site.js';
import { readSse } from './support/sse.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';

/** Every README of the checkout, in the order they run. */
const READMES = ['README.md', 'deploy/README.md', 'services/browser-pool/README.md', 'clients/python/README.md', 'clients/typescript/README.md', 'clients/typescript/CLI.md', 'clients/typescript/MCP.md'];
/** Files the example tasks of GET /agents expect on the run's disk, attached when a task names one. */
const EXAMPLE_DISK = path.join(ROOT, 'test/fixtures/example-disk');
const BLOCK_TIMEOUT_MS = 120_000;

let f: StackFixture;
let site: TestSite;
let started: Promise<void> | undefined;
/** One stack for the file, started by the first suite that needs it (the runner's own tests do not). */
const needStack = () =>
  (started ??= (async () => {
    site = await serveSite();
    f = await startStackFixture({ env: { DEFAULT_MODEL: 'builtin' } });
  })());
after(async () => {
  await f?.stop();
  await site?.close();
});

/** The README's text with the test's stand-ins (see the file comment). */
function substitute(text: string): string {
  const local = site.url('example.com');
  const edge = (port: number, url: string) => (t: string) => t.replaceAll(`http://localhost:${port}`, url).replaceAll(`ws://localhost:${port}`, url.replace(/^http/, 'ws'));
  return [
    (t: string) => t.replaceAll('http://localhost:8080', f.stack.baseUrl),
    edge(8081, f.stack.edgeUrl('files')),
    edge(8082, f.stack.edgeUrl('liveView')),
    edge(9222, f.stack.edgeUrl('cdp')),
    (t: string) => t.replace(/\bhttps?:\/\/(?:www\.)?example\.com\b/g, local),
    // A bare host, as in "List the links on example.com" (not an address such as ada@example.com).
    (t: string) => t.replace(/(?<![\w@./-])(?:www\.)?example\.com\b/g, local),
  ].reduce((t, sub) => sub(t), text);
}

/** A scratch folder laid out as a checkout after `make up`: data/local-api-key, notes.txt, and the rest of the checkout linked. */
function workingDirectory(): string {
  const dir = tempDir('readme');
  for (const e of fs.readdirSync(ROOT)) {
    if (e === 'data' || e === '.git' || e === 'dist') continue;
    fs.symlinkSync(path.join(ROOT, e), path.join(dir, e));
  }
  fs.mkdirSync(path.join(dir, 'data'));
  fs.writeFileSync(path.join(dir, 'data', 'local-api-key'), `${f.key}\n`, { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'Buy milk.\nCall Ada about the engine.\n');
  return dir;
}

describe('the README test runner', () => {
  test('when a README has blocks of several kinds, then only sh, bash and shell blocks without no-run run', () => {
    const md = ['```sh', 'echo 1', '```', '```sh no-run', 'make up', '```', '```console', '$ ls', '```', '  ```bash', '  echo 2', '  ```', '``` `inline` code', '```', 'plain', '```'].join('\n');
    assert.deepEqual(
      fencedBlocks(md).map((b) => [b.line, b.lang, b.runs, b.lines]),
      [
        [2, 'sh', true, ['echo 1']],
        [5, 'sh', false, ['make up']],
        [8, 'console', false, ['$ ls']],
        [11, 'bash', true, ['echo 2']],
        [15, '', false, ['plain']],
      ],
    );
  });

  test('when an expected output elides with …, then it matches what it shows and nothing else', () => {
    const e = parseExpected('{"items":[{"id":"file_…","name":"notes.txt","upload_url":"http://h/u/file_…?exp=…&sig=…"}]}');
    assert.equal(mismatch(e, { items: [{ id: 'file_abc', name: 'notes.txt', upload_url: 'http://h/u/file_abc?exp=1&sig=x' }] }), undefined);
    assert.match(mismatch(e, { items: [{ id: 'run_abc', name: 'notes.txt', upload_url: 'http://h/u/file_abc?exp=1&sig=x' }] })!, /\$\.items\[0\]\.id: expected "file_…"/);
    assert.match(mismatch(e, { items: [{ id: 'file_a', name: 'notes.txt', upload_url: 'http://h/u/file_a?exp=1&sig=x', kind: 'input' }] })!, /members not in the README: kind/);
    assert.match(mismatch(e, { items: [] })!, /expected 1 elements, got 0/);

    const loose = parseExpected('{"steps":[{"number":1,"action":"navigate …",…},…],"hasMore":false,…}');
    assert.equal(mismatch(loose, { steps: [{ number: 1, action: 'navigate https://x', url: 'u' }, { number: 2 }], hasMore: false, nextCursor: null }), undefined);
    assert.match(mismatch(loose, { steps: [], hasMore: false })!, /expected 1 or more elements/);
    assert.equal(mismatch(parseExpected('{"status":…,"output":null}'), { status: 'completed', output: null }), undefined);
    assert.match(mismatch(parseExpected('{"output":null}'), { output: 0 })!, /expected null, got 0/);
    assert.throws(() => parseExpected('{"a": 1,}x'), /not JSON/);
  });

  test('when a command prints lines before its JSON, then its last line is what is compared', () => {
    assert.equal(checkOutput(parseExpected('{"status":"completed"}'), 'waiting\n{"status":"completed"}\n'), undefined);
    assert.match(checkOutput(parseExpected('{"status":"completed"}'), 'Not found')!, /not JSON/);
  });

  test('when a block fails, then the report names the README line of the failing command and shows what it printed', async () => {
    const cwd = tempDir('readme-runner');
    try {
      const md = ['Intro', '```sh', 'A=1', 'echo "A is $A"', '```', '```sh', 'echo "still $A"', 'B=$(cat \\', '  no-such-file)', 'echo never', '```'].join('\n');
      const { failure, blocks } = await runReadme({ file: 'X.md', markdown: md, substitute: (t) => t, cwd, env: { PATH: process.env.PATH }, blockTimeoutMs: 10_000 });
      assert.equal(blocks, 2);
      assert.ok(failure);
      assert.equal(failure.line, 8);
      const report = describeFailure('X.md', failure);
      assert.match(report, /^X\.md:8: the command exited with status 1/);
      const printed = report.split('--- its output ---\n')[1]!;
      assert.match(printed, /^still 1\n.*no-such-file/);
      assert.doesNotMatch(printed, /never/, 'the session stopped at the failing command');
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });
  test('when a block runs past its time, then it fails naming the block, and nothing it started outlives the session', { skip: !pidNamespace() && 'no PID namespaces here (unshare)' }, async () => {
    const cwd = tempDir('readme-runner');
    // A detached process of its own session, as a server started by an example would be (`make up`).
    const marker = `sleep ${31_000 + Math.floor(Math.random() * 1000)}`;
    try {
      const md = ['```sh', `(setsid ${marker} > /dev/null 2>&1 &)`, 'echo started', 'sleep 60', '```'].join('\n');
      const { failure } = await runReadme({ file: 'X.md', markdown: md, substitute: (t) => t, cwd, env: { PATH: process.env.PATH }, blockTimeoutMs: 2000 });
      assert.ok(failure);
      assert.match(describeFailure('X.md', failure), /^X\.md:2: the block did not finish within 2 s\n[\s\S]*--- its output ---\nstarted$/);
      assert.equal(spawnSync('pgrep', ['-f', `^${marker}$`]).status, 1, `${marker} was ended with the session`);
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });
});

test("when a README shows Python or TypeScript code, then each block is one of its package's example files, word for word (the package's tests run them)", () => {
  const examples = (dir: string) => fs.readdirSync(path.join(ROOT, dir)).map((name) => fs.readFileSync(path.join(ROOT, dir, name), 'utf8'));
  const known: Record<string, string[]> = {
    python: examples('clients/python/examples'),
    ts: [...examples('clients/typescript/examples')],
  };
  known.typescript = known.ts!;
  for (const readme of READMES.filter((r) => fs.existsSync(path.join(ROOT, r)))) {
    for (const block of fencedBlocks(fs.readFileSync(path.join(ROOT, readme), 'utf8'))) {
      const files = known[block.lang];
      if (!files) continue;
      const text = `${block.lines.join('\n')}\n`;
      // A package README may show a fragment of an example; the top README shows whole programs.
      const whole = files.includes(text);
      const part = readme.startsWith('clients/') && files.some((f) => f.includes(text.trim()));
      assert.ok(whole || part, `${readme}:${block.line}: a ${block.lang} block that is no example file:\n${text}`);
    }
  }
});

describe('every README', () => {
  before(needStack);
  test('when the checkout has a README, then this test runs its examples (it is in READMES)', () => {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
        if (['node_modules', 'dist', 'data'].includes(e.name) || e.name.startsWith('.')) continue;
        const rel = dir ? `${dir}/${e.name}` : e.name;
        if (e.isDirectory()) walk(rel);
        else if (e.name === 'README.md') found.push(rel);
      }
    };
    walk('');
    assert.deepEqual(found.filter((r) => !READMES.includes(r)), []);
  });

  for (const readme of READMES) {
    const file = path.join(ROOT, readme);
    test(`when the shell examples of ${readme} are run as written, then each succeeds with the output it shows`, { skip: !fs.existsSync(file) && `${readme} does not exist yet` }, async () => {
      const cwd = workingDirectory();
      try {
        const { failure } = await runReadme({
          file: readme,
          markdown: fs.readFileSync(file, 'utf8'),
          substitute,
          cwd,
          env: { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8' },
          blockTimeoutMs: BLOCK_TIMEOUT_MS,
        });
        if (failure) assert.fail(describeFailure(readme, failure));
      } finally {
        fs.rmSync(cwd, { recursive: true, force: true });
      }
    });
  }
});

describe('the example tasks of GET /agents', () => {
  before(needStack);
  test('when each example task runs with the builtin model against stand-ins for the pages it names, then it completes', { concurrency: true }, async (t) => {
    const res = await f.api('/api/v1/agents');
    const { agents } = (await res.json()) as { agents: { name: string; exampleTasks: string[] }[] };
    const examples = agents.flatMap((a) => a.exampleTasks.map((task) => ({ agent: a.name, task })));
    assert.ok(examples.length >= 2, 'GET /agents lists example tasks');
    const json = (url: string, body: unknown) => f.api(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

    await Promise.all(
      examples.map(({ agent, task }) =>
        t.test(`${agent}: ${task}`, async () => {
          const api = `/api/v1/agents/${agent}`;
          // A file the task reads from the disk is attached, as its user would.
          const attach = fs.existsSync(EXAMPLE_DISK) ? fs.readdirSync(EXAMPLE_DISK).filter((name) => task.includes(name)) : [];
          const ids: string[] = [];
          for (const name of attach) {
            const added = (await (await json(`${api}/files`, { files: [{ name }] })).json()) as { items: { id: string; upload_url: string }[] };
            const put = await fetch(added.items[0]!.upload_url, { method: 'PUT', body: fs.readFileSync(path.join(EXAMPLE_DISK, name)) });
            assert.equal(put.status, 200, await put.text());
            ids.push(added.items[0]!.id);
          }
          const created = await json(`${api}/runs`, { task: substitute(task), model: 'builtin', attached_file_ids: ids });
          assert.equal(created.status, 202, await created.clone().text());
          const { id } = (await created.json()) as { id: string };
          await readSse(await f.api(`${api}/runs/${id}/events/stream`));
          const run = (await (await f.api(`${api}/runs/${id}`)).json()) as { status: string; error: string | null; result: string | null };
          assert.equal(run.status, 'completed', `${run.error}`);
          assert.ok(run.result?.trim(), 'the run has an answer');
          // A file the task says to save is among the run's output files.
          const saved = [...task.matchAll(/\bsave\b[^.]*?\bto\s+([\w.-]+\.\w+)/gi)].map((m) => m[1]!);
          if (saved.length) {
            const files = (await (await f.api(`${api}/runs/${id}/files?kind=output`)).json()) as { items: { name: string }[] };
            for (const name of saved) assert.ok(files.items.some((i) => i.name === name), `${name} is an output file: ${JSON.stringify(files.items.map((i) => i.name))}`);
          }
        }),
      ),
    );
  });
});
