/**
 * The browsercode agent end to end through the public API with the builtin model: a terminal on
 * the run's disk (streamed output, output files, limits, no secrets, an unprivileged user), a
 * browser opened only when needed, durable sessions (busy follow-ups queue, a stop ends only
 * the turn) and workspaces shared across conversations.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { anthropicUserText, startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { startFakeOpenAI, userText, type FakeOpenAI } from './support/fake-openai.js';
import { serveSite, type TestSite } from './support/site.js';
import { readSse, type SseEvent } from './support/sse.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';

const SHELL_TIMEOUT_MS = 8000;
const PROVIDER_KEY = 'sk-provider-secret-never-in-shells';
let f: StackFixture;
let site: TestSite;
let fake: FakeOpenAI;
let anthropic: FakeAnthropic;
/** Where the run service materialises run disks (named by run id). */
const WORK_DIR = tempDir('bc-work');
// A file over the quota also exceeds FILE_SIZE_LIMIT_BYTES: it is reported skipped, not stored.
const DISK_QUOTA_MB = 32;

before(async () => {
  site = await serveSite();
  fake = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  f = await startStackFixture({
    projects: ['alpha', 'beta'],
    env: {
      ...NOT_RECORDED,
      DEFAULT_MODEL: 'builtin',
      SHELL_TIMEOUT_MS: String(SHELL_TIMEOUT_MS),
      SHELL_MAX_OUTPUT_BYTES: '4096',
      FILE_SIZE_LIMIT_BYTES: String(1024 * 1024),
      // A provider key the run service holds: commands must never see it.
      ANTHROPIC_API_KEY: PROVIDER_KEY,
      ANTHROPIC_BASE_URL: anthropic.baseUrl,
      MODEL_PRICES: JSON.stringify({ 'claude-fake-1': { input: 3, output: 15 } }),
      OPENAI_BASE_URL: fake.baseUrl,
      OPENAI_MODELS: 'fake-gpt',
      MODEL_MAX_RETRIES: '0',
      RUN_WORK_DIR: WORK_DIR,
      SHELL_MAX_DISK_MB: String(DISK_QUOTA_MB),
      SHELL_MAX_PROCESSES: '100',
      SHELL_MAX_MEMORY_MB: '256',
      // A run whose service died is failed soon after, so a test can wait for it.
      RUN_LEASE_MS: '3000',
    },
  });
});
after(async () => {
  await f.stop();
  await fake.close();
  await anthropic.close();
  await site.close();
  fs.rmSync(WORK_DIR, { recursive: true, force: true });
});

const BASE = '/api/v1/agents/browsercode';
const key = (p: 'alpha' | 'beta') => f.projects[p]!.key;
const json = (p: 'alpha' | 'beta', method: string, url: string, body?: unknown) =>
  f.api(url, { method, key: key(p), headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

interface Created {
  id: string;
  status: string;
  sessionId: string;
  workspaceId: string | null;
  eventsUrl: string;
}

async function start(body: Record<string, unknown>, p: 'alpha' | 'beta' = 'alpha'): Promise<Created> {
  const res = await json(p, 'POST', `${BASE}/runs`, { model: 'builtin', ...body });
  assert.equal(res.status, 202, await res.clone().text());
  return (await res.json()) as Created;
}

/** Follows the run's event stream to its end (or until `until`), then reads the run. */
async function follow(runId: string, until?: (e: SseEvent) => boolean, p: 'alpha' | 'beta' = 'alpha'): Promise<{ run: Record<string, any>; events: SseEvent[] }> {
  const res = await f.api(`${BASE}/runs/${runId}/events/stream`, { key: key(p) });
  assert.equal(res.status, 200);
  const events = await readSse(res, until);
  const run = (await (await json(p, 'GET', `${BASE}/runs/${runId}`)).json()) as Record<string, any>;
  return { run, events };
}

const ofType = (events: SseEvent[], type: string) => events.filter((e) => e.event === type).map((e) => e.data.data);
const terminal = (events: SseEvent[]) => ofType(events, 'terminal.output').map((d) => String(d.chunk)).join('');

async function files(runId: string, kind: 'input' | 'output'): Promise<Map<string, string>> {
  const res = await json('alpha', 'GET', `${BASE}/runs/${runId}/files?kind=${kind}`);
  assert.equal(res.status, 200);
  const { items } = (await res.json()) as { items: { name: string; downloadUrl: string }[] };
  const out = new Map<string, string>();
  for (const it of items) out.set(it.name, await (await fetch(it.downloadUrl)).text());
  return out;
}

describe('a terminal on the run disk', () => {
  test('when a task runs commands and writes a file, then output streams as events and the files are outputs with their bytes; no browser is opened', async () => {
    const created = await start({ task: "Run `echo hello from $(id -u)`. Run `printf 'a,b\\n1,2\\n' > table.csv`. Write 'all done' to notes/status.txt." });
    assert.equal(created.eventsUrl, `${BASE}/runs/${created.id}/events`);
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.browserId, null, 'no browser was needed');
    assert.match(run.result, /^hello from /);
    // As root, a uid of the run's own (SHELL_UID_BASE + n), not nobody.
    assert.match(terminal(events), process.getuid?.() === 0 ? /hello from 1\d{5}\n/ : /hello from /);
    const calls = ofType(events, 'tool.call');
    assert.deepEqual(calls.map((c) => c.tool), ['shell', 'shell', 'write_file']);
    assert.deepEqual(ofType(events, 'tool.result').map((r) => r.ok), [true, true, true]);
    assert.deepEqual(ofType(events, 'file.written').map((w) => w.path).sort(), ['notes/status.txt', 'table.csv']);
    assert.ok(!events.some((e) => e.event === 'browser.ready'));

    const outputs = await files(created.id, 'output');
    assert.equal(outputs.get('table.csv'), 'a,b\n1,2\n');
    assert.equal(outputs.get('notes/status.txt'), 'all done');
    assert.equal((await files(created.id, 'input')).size, 0);
  });

  test('when an attached file is processed by a command, then the result reads it and only the new file is an output', async () => {
    const add = await json('alpha', 'POST', `${BASE}/files`, { files: [{ name: 'data.csv' }] });
    assert.equal(add.status, 201);
    const [item] = ((await add.json()) as { items: { id: string; upload_url: string }[] }).items;
    assert.equal((await fetch(item!.upload_url, { method: 'PUT', body: 'x\ny\nz\n' })).status, 200);
    const created = await start({ task: 'Run `wc -l < data.csv > count.txt`. Read file count.txt.', attached_file_ids: [item!.id] });
    const { run } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.result, /^3$/m);
    assert.deepEqual([...(await files(created.id, 'input')).keys()], ['data.csv']);
    assert.deepEqual([...(await files(created.id, 'output')).entries()], [['count.txt', '3\n']]);
  });

  test("when the builtin runs GET /agents' example task that filters an attached JSON file, then the output file holds only the open entries", async () => {
    const listed = (await (await json('alpha', 'GET', '/api/v1/agents')).json()) as { agents: { name: string; exampleTasks: string[] }[] };
    const task = listed.agents.find((a) => a.name === 'browsercode')!.exampleTasks.find((t) => t.startsWith('Read input.json'))!;
    const add = await json('alpha', 'POST', `${BASE}/files`, { files: [{ name: 'input.json' }] });
    const [item] = ((await add.json()) as { items: { id: string; upload_url: string }[] }).items;
    const entries = [{ id: 1, status: 'open' }, { id: 2, status: 'closed' }, { id: 3, status: 'open' }];
    assert.equal((await fetch(item!.upload_url, { method: 'PUT', body: JSON.stringify(entries) })).status, 200);
    const { run } = await follow((await start({ task, attached_file_ids: [item!.id] })).id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(JSON.parse((await files(run.id, 'output')).get('open.json')!), [entries[0], entries[2]]);
  });

  test('when a command reads its environment, the service data or the services on this host, then it finds no secret and no access', async () => {
    const env = await start({ task: 'Run `env`.' });
    const { run, events } = await follow(env.id);
    assert.equal(run.status, 'completed', run.error);
    const seen = terminal(events);
    assert.match(seen, /^PATH=/m);
    for (const secret of [PROVIDER_KEY, 'ANTHROPIC', 'DATABASE_URL', 'SIGNING_SECRET', 'NATS_URL', 'DATA_DIR']) assert.ok(!seen.includes(secret), `${secret} is not in a command's environment`);

    const gatewayPort = new URL(f.stack.baseUrl).port;
    const dial = await start({ task: `Run \`exec 3<>/dev/tcp/127.0.0.1/${gatewayPort}\`.` });
    const { run: cutOff } = await follow(dial.id);
    assert.equal(cutOff.status, 'failed', 'a command cannot reach the services on this host');
    assert.match(cutOff.error, /Network is unreachable/);

    if (process.getuid?.() === 0) {
      const peek = await start({ task: `Run \`ls ${f.dataDir}\`.` });
      const { run: denied } = await follow(peek.id);
      assert.equal(denied.status, 'failed');
      assert.match(denied.error, /exited with code 2: .*(No such file or directory|Permission denied)/s);
    }
  });

  test('when a command outlives its time limit or prints too much, then it is cut and the run says why', async () => {
    const slow = await start({ task: 'Run `sleep 60`.' });
    const { run } = await follow(slow.id);
    assert.equal(run.status, 'failed');
    assert.equal(run.error, `The command was stopped after ${SHELL_TIMEOUT_MS / 1000} s (time limit)`);

    const loud = await start({ task: 'Run `yes | head -c 100000`.' });
    const { run: cut, events } = await follow(loud.id);
    assert.equal(cut.status, 'completed', cut.error);
    assert.equal(terminal(events).length, 4096);
    assert.match(cut.result, /^\(output cut at 4096 bytes: only its first 4096 bytes follow; redirect it to a file to keep all of it\)\ny\ny\n/);
    assert.equal(ofType(events, 'tool.result')[0]!.truncated, true);
  });

  test('when a file is larger than a read returns, then the answer says it was cut first and how to read the rest', async () => {
    const created = await start({ task: 'Run `yes a | head -c 300000 > big.txt`, then read file big.txt' });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    const notice = '(file cut: big.txt is 300000 bytes and only its first 262144 follow; read the rest with a command such as `tail -c +262145 big.txt`)\n';
    assert.ok(run.result.startsWith(notice), run.result.slice(0, 200));
    assert.equal(run.result.length, notice.length + 262144);
    const read = ofType(events, 'tool.result').find((d) => d.tool === 'read_file')!;
    assert.equal(read.truncated, true);
    assert.equal(read.sizeBytes, 300000);
  });

  test('when the commands print nothing, then the completed run still says what it did', async () => {
    const created = await start({ task: 'Run `true`. Run `mkdir -p out`.' });
    const { run } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'Done: run true; run mkdir -p out');
  });

  test('when a command makes a file over the size limit, then the others are still stored and the run says which was not', async () => {
    // Far over the limit: the storage service ends the upload while the run is still sending.
    const created = await start({ task: 'Run `head -c 24000000 /dev/zero > big.bin; echo small > small.txt`.' });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.deepEqual(ofType(events, 'file.skipped'), [{ path: 'big.bin', reason: 'big.bin is larger than the file size limit of 1048576 bytes' }]);
    assert.match(run.result, /big\.bin is larger than the file size limit of 1048576 bytes; it was not stored/);
    assert.deepEqual([...(await files(created.id, 'output')).keys()], ['small.txt']);
  });

  test('when a path leaves the disk, then the run fails naming it', async () => {
    const created = await start({ task: "Write 'x' to ../../escape.txt." });
    const { run } = await follow(created.id);
    assert.equal(run.status, 'failed');
    assert.equal(run.error, `"../../escape.txt" is outside the run's disk`);
  });
});

/** Processes whose command line contains `text`. */
const processesWith = (text: string) =>
  fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(text);
    } catch {
      return false;
    }
  });

describe('the confinement of a run', () => {
  test('when runs of two projects work at the same time, then one cannot read, list or change the other\'s disk', async () => {
    const alpha = await start({ task: 'Run `echo alpha-secret > secret.txt; echo ready; sleep 30`.' });
    await follow(alpha.id, (e) => e.event === 'terminal.output');
    const theirs = path.join(WORK_DIR, alpha.id);
    assert.equal(fs.readFileSync(path.join(theirs, 'secret.txt'), 'utf8'), 'alpha-secret\n', 'the disk of the first run is there');
    const beta = await start({ task: `Run \`cat ${theirs}/secret.txt; ls ${theirs}; echo planted > ${theirs}/planted.txt\`.` }, 'beta');
    const { run } = await follow(beta.id, undefined, 'beta');
    assert.equal(run.status, 'failed');
    assert.match(run.error, /No such file or directory|Permission denied/);
    assert.doesNotMatch(run.error, /alpha-secret|secret\.txt\n/);
    assert.equal(fs.existsSync(path.join(theirs, 'planted.txt')), false);
    assert.equal((await json('alpha', 'POST', `${BASE}/runs/${alpha.id}/stop`)).status, 200);
    await follow(alpha.id);
  });

  test('when a command dials a Unix socket of the host (under /tmp, /var/run/postgresql), then it cannot connect', async () => {
    const dir = tempDir('bc-sock');
    const sock = path.join(dir, 'host.sock');
    const server = net.createServer((c) => c.end('hello from the host\n'));
    await new Promise<void>((r) => server.listen(sock, r));
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(sock, 0o777);
    try {
      const dial = await start({ task: `Run \`perl -MIO::Socket::UNIX -e '$c = IO::Socket::UNIX->new(Peer => "${sock}") or die "connect: $!\\n"; print <$c>'\`.` });
      const { run } = await follow(dial.id);
      assert.equal(run.status, 'failed', run.result);
      assert.match(run.error, /connect: (No such file or directory|Connection refused)/);
      if (fs.existsSync('/var/run/postgresql')) {
        const psql = await start({ task: "Run `psql -h /var/run/postgresql -U postgres -c 'select 1'`." });
        const { run: db } = await follow(psql.id);
        assert.equal(db.status, 'failed', db.result);
        assert.doesNotMatch(db.error, /\(1 row\)/);
      }
    } finally {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('when a command leaves files in /tmp and /dev/shm, then the next command does not find them and the host never had them', async () => {
    const tag = `left-${process.pid}-${Date.now()}`;
    const created = await start({ task: `Run \`echo x > /tmp/${tag} && echo y > /dev/shm/${tag}\`. Run \`ls /tmp/${tag} /dev/shm/${tag}\`.` });
    const { run, events } = await follow(created.id);
    assert.deepEqual(ofType(events, 'tool.result').map((r) => r.ok), [true, false]);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /No such file or directory/);
    assert.equal(fs.existsSync(`/tmp/${tag}`), false);
    assert.equal(fs.existsSync(`/dev/shm/${tag}`), false);
  });

  test('when a command starts 3,000 processes or writes 2 GiB, then it is stopped with the reason and the run goes on', async () => {
    fake.script = (_req, n) =>
      [
        { tool: 'shell', args: { command: `perl -e 'for my $i (1..3000) { my $p = fork; if (!defined $p) { print "fork failed after $i: $!\\n"; exit 1 } if (!$p) { sleep 3131; exit } } print "started 3000\\n"'` } },
        { tool: 'shell', args: { command: 'head -c 2G /dev/zero > big.bin' } },
        { tool: 'shell', args: { command: 'rm -f big.bin; echo room again' } },
        { tool: 'done', args: { result: 'survived' } },
      ][n] ?? { text: 'no more' };
    const created = await start({ task: 'Stress the machine', model: 'fake-gpt' });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    const results = ofType(events, 'tool.result');
    assert.deepEqual(results.map((r) => r.ok), [false, false, true]);
    assert.match(String(results[0]!.error), /fork failed after \d+: Resource temporarily unavailable/);
    assert.doesNotMatch(String(results[0]!.error), /started 3000/);
    assert.match(String(results[1]!.error), new RegExp(`^The command was stopped: disk quota of ${DISK_QUOTA_MB} MiB exceeded`));
    assert.equal(results[1]!.diskQuotaExceeded, true);
    assert.equal(results[2]!.output, 'room again');
    assert.deepEqual(processesWith('sleep 3131'), [], 'the forked processes are gone');
  });

  test('when a command allocates more memory than the cap, then it fails', async () => {
    const created = await start({ task: `Run \`perl -e '$x = "x" x (600 * 1024 * 1024); print "allocated\\n"'\`.` });
    const { run } = await follow(created.id);
    assert.equal(run.status, 'failed', run.result);
    assert.doesNotMatch(run.error, /allocated/);
  });

  test('when the run service is killed mid-command and started again, then the command is gone, the run is taken over, the command reported interrupted, and the builtin ends the run', async () => {
    const created = await start({ task: 'Run `echo started; sleep 4711`.' });
    await follow(created.id, (e) => e.event === 'terminal.output');
    const folder = path.join(WORK_DIR, created.id);
    assert.equal(fs.existsSync(folder), true);
    await f.stack.kill('run');
    await f.stack.startService('run'); // listens only once it has reaped
    assert.deepEqual(processesWith('sleep 4711'), [], 'the command did not outlive the service');
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /resumed on another worker .* the shell call it was making then was interrupted and may have partly run; the builtin model does not repeat it/);
    const cut = ofType(events, 'tool.result').at(-1)!;
    assert.deepEqual([cut.tool, cut.ok], ['shell', false]);
    assert.match(String(cut.error), /^Interrupted: the worker running this run stopped while this ran/);
    assert.equal(ofType(events, 'run.resumed').length, 1);
    assert.equal(fs.existsSync(folder), false, 'the work folder of the dead run is removed');
  });
});

describe('the browser, when needed', () => {
  test('when a task reads a page and saves what it found, then a browser is opened for it, its steps are recorded and it is stopped after', async () => {
    const created = await start({ task: `Run \`echo before\`. Open ${site.url('run-table.html')}. Extract the table as JSON. Save the result to table.json. Run \`grep -o Lamp table.json\`.` });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.browserId, /^brw_/);
    const types = events.map((e) => e.event);
    assert.ok(types.indexOf('browser.ready') > types.indexOf('terminal.output'), 'the browser opened when first needed');
    assert.match(String(ofType(events, 'browser.ready')[0]!.liveViewUrl), /token=/);
    const saved = JSON.parse((await files(created.id, 'output')).get('table.json')!) as { Product: string }[];
    assert.deepEqual(saved.map((r) => r.Product), ['Lamp', 'Desk', 'Chair']);
    assert.match(run.result, /Lamp$/);
    const steps = (await (await json('alpha', 'GET', `${BASE}/runs/${created.id}/steps`)).json()) as { steps: { number: number; action: string }[] };
    assert.deepEqual(steps.steps.map((s) => s.action.split(' ')[0]), ['navigate', 'extract']);
    const browser = (await (await json('alpha', 'GET', `/api/v1/browsers/${run.browserId}`)).json()) as { status: string };
    assert.equal(browser.status, 'stopped', "the turn's browser ends with it");
  });
});

describe('durable sessions and workspaces', () => {
  test('when a follow-up arrives while the session is busy, then it waits queued and then sees the first turn\'s files', async () => {
    const first = await start({ task: 'Run `sleep 1; echo one > one.txt`.' });
    const second = await start({ task: 'Read file one.txt.', session_id: first.sessionId });
    assert.equal(second.status, 'queued');
    const [{ run: a }, { run: b }] = await Promise.all([follow(first.id), follow(second.id)]);
    assert.equal(a.status, 'completed', a.error);
    assert.equal(b.status, 'completed', b.error);
    assert.equal(b.result, 'one\n');
    assert.ok(Date.parse(b.startedAt) >= Date.parse(a.finishedAt), 'the follow-up started after the first turn ended');
    const session = (await (await json('alpha', 'GET', `${BASE}/sessions/${first.sessionId}`)).json()) as { status: string };
    assert.equal(session.status, 'open');
  });

  test('when a running turn is stopped, then its command is killed, what it wrote is kept, and the waiting turn starts after and sees it', async () => {
    const created = await start({ task: 'Run `echo kept > kept.txt; echo started; sleep 45`.' });
    await follow(created.id, (e) => e.event === 'terminal.output');
    const next = await start({ task: 'Read file kept.txt.', session_id: created.sessionId });
    assert.equal(next.status, 'queued');
    const stopped = await json('alpha', 'POST', `${BASE}/runs/${created.id}/stop`);
    assert.equal(stopped.status, 200);
    const { events } = await follow(created.id);
    assert.equal(events.at(-1)!.event, 'run.stopped');
    const { run } = await follow(next.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'kept\n', 'the stopped turn stored its file before the next turn began');
    const sleeping = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() === 'sleep 45';
      } catch {
        return false;
      }
    });
    assert.deepEqual(sleeping, [], 'the command is gone');
    const session = (await (await json('alpha', 'GET', `${BASE}/sessions/${created.sessionId}`)).json()) as { status: string };
    assert.equal(session.status, 'open');
  });

  test('when two conversations use one workspace, then the second reads what the first wrote; another project cannot use it', async () => {
    const ws = (await (await json('alpha', 'POST', '/api/v1/agent-workspaces', { name: 'shared' })).json()) as { id: string };
    const writer = await start({ task: "Write 'from the first conversation' to shared.txt.", workspace_id: ws.id });
    assert.equal(writer.workspaceId, ws.id);
    assert.equal((await follow(writer.id)).run.status, 'completed');
    const reader = await start({ task: 'Read file shared.txt.', workspace_id: ws.id });
    assert.notEqual(reader.sessionId, writer.sessionId);
    const { run } = await follow(reader.id);
    assert.equal(run.result, 'from the first conversation');
    const listed = (await (await json('alpha', 'GET', `/api/v1/agent-workspaces/${ws.id}/files`)).json()) as { items: { name: string }[] };
    assert.deepEqual(listed.items.map((i) => i.name), ['shared.txt']);

    const foreign = await json('beta', 'POST', `${BASE}/runs`, { task: 'List files', workspace_id: ws.id });
    assert.equal(foreign.status, 404);
  });
});

describe('an OpenAI-compatible model', () => {
  test('when the model uses the terminal and files, then it sees each result, recovers from a failed command and its file is an output', async () => {
    fake.script = (_req, n) =>
      [
        { tool: 'shell', args: { command: 'printf 41 > n.txt && cat n.txt' } },
        { tool: 'shell', args: { command: 'exit 3' } },
        { tool: 'write_file', args: { path: 'answer.txt', content: '42' } },
        { tool: 'done', args: { result: 'The answer is in answer.txt' } },
      ][n] ?? { text: 'no more' };
    fake.requests.length = 0;
    const created = await start({ task: 'Add one to the number and save it', model: 'fake-gpt' });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'The answer is in answer.txt');
    assert.equal(run.totalInputTokens, 400);

    const tools = (fake.requests[0]!.tools ?? []).map((t) => t.function.name);
    for (const t of ['shell', 'write_file', 'read_file', 'list_files', 'navigate', 'done']) assert.ok(tools.includes(t), `the model is offered ${t}`);
    assert.match(userText(fake.requests[0]!), /no browser is open yet/);
    assert.match(userText(fake.requests[1]!), /Step 1: run printf 41 > n\.txt && cat n\.txt\n  result → <<page-content \w+ from shell result>>\n41\n/);
    assert.match(userText(fake.requests[2]!), /FAILED: The command exited with code 3/);
    assert.match(userText(fake.requests[3]!), /Files on the run's disk: answer\.txt, n\.txt/);
    assert.deepEqual(ofType(events, 'tool.result').map((r) => r.ok), [true, false, true]);
    assert.deepEqual([...(await files(created.id, 'output')).entries()].sort(), [['answer.txt', '42'], ['n.txt', '41']]);
  });
});

describe('an Anthropic model', () => {
  test('when a Claude model drives the run, then the Messages API is called with the key and the tools, and its tool uses run', async () => {
    anthropic.script = (_req, n) =>
      [
        { tool: 'shell', input: { command: 'echo from claude > c.txt && cat c.txt' } },
        { tool: 'done', input: { result: 'Wrote c.txt' } },
      ][n] ?? { text: 'no more' };
    anthropic.requests.length = 0;
    const created = await start({ task: 'Write a file', model: 'claude-fake-1' });
    const { run, events } = await follow(created.id);
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.result, 'Wrote c.txt');
    assert.equal(run.totalInputTokens, 240);
    assert.equal(run.totalOutputTokens, 24);
    assert.equal(run.totalCostUsd, String((240 * 3 + 24 * 15) / 1e6));
    const first = anthropic.requests[0]!;
    assert.equal(first.headers.apiKey, PROVIDER_KEY);
    assert.match(first.headers.version, /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(first.body.model, 'claude-fake-1');
    assert.ok(first.body.tools!.some((t) => t.name === 'shell'));
    assert.match(anthropicUserText(anthropic.requests[1]!), /from claude/);
    assert.match(terminal(events), /from claude/);
    assert.deepEqual([...(await files(created.id, 'output')).entries()], [['c.txt', 'from claude\n']]);
  });

  test('when Anthropic answers with an error, then the run fails saying so, without the key', async () => {
    anthropic.script = () => ({ status: 401, type: 'authentication_error', message: 'invalid x-api-key' });
    const created = await start({ task: 'Anything', model: 'claude-fake-1' });
    const { run } = await follow(created.id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /^The model provider failed: HTTP 401/);
    assert.ok(!run.error.includes(PROVIDER_KEY));
  });
});
