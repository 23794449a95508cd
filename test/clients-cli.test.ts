/**
 * The `ats` command line as a person and a script use it: its real binary
 * (clients/typescript/bin/ats.js, built first) against one real stack, piped (plain lines, exit
 * codes, `--json`) and on a real terminal (a pty through `script`: the spinner and the step
 * counter). The terminal's output is saved to .test-artifacts/cli/ to be looked at.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildClientPackage, CLIENT_DIR } from './support/client-build.js';
import { startClientHarness, type ClientHarness } from './support/client-harness.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

const PKG = CLIENT_DIR;
const BIN = path.join(PKG, 'bin/ats.js');
const ARTIFACTS = path.resolve('.test-artifacts/cli');
const WORK = tempDir('cli');

let h: ClientHarness;
let site: string;

before(async () => {
  // The binary runs the built package: build it while the stack starts.
  [h] = await Promise.all([startClientHarness(), buildClientPackage()]);
  site = h.env.ATS_TEST_SITE!;
  fs.mkdirSync(ARTIFACTS, { recursive: true });
});
after(async () => {
  await h?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a user's shell with the harness's settings (and nothing of ours that could leak in). */
function userEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ATS_') && k !== 'NODE_OPTIONS') env[k] = v;
  return { ...env, ATS_BASE_URL: h.env.ATS_BASE_URL!, ATS_API_KEY: h.env.ATS_API_KEY!, ...extra };
}

/** Runs `ats …` piped, as a script would. */
function ats(args: string[], o: { env?: Record<string, string>; cwd?: string } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: o.cwd ?? WORK, env: o.env ?? userEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `ats …` that must succeed (exit 0); its output otherwise names what went wrong. */
async function done(args: string[], o: { env?: Record<string, string>; cwd?: string } = {}): Promise<Result> {
  const r = await ats(args, o);
  assert.equal(r.code, 0, `ats ${args.join(' ')}\n${show(r)}`);
  return r;
}

const show = (r: Result) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
const json = <T>(r: Result): T => {
  assert.equal(r.code, 0, show(r));
  return JSON.parse(r.stdout) as T;
};
const TABLE_TASK = () => `Open ${site}/run-table.html. Extract the table as JSON.`;
const ESC = '\x1b';

describe('ats, piped as a script runs it', () => {
  test('when asked for help, then every command and its options are described, and a usage mistake exits 2', async () => {
    const top = await ats(['--help']);
    assert.equal(top.code, 0);
    for (const c of ['ats run <task>', 'ats runs list', 'ats runs get', 'ats runs stop', 'ats runs steps', 'ats runs events', 'ats runs files', 'ats browsers create', 'ats browsers live-view', 'ats browsers recording', 'ats files upload', 'ats files download', 'ats profiles create', 'ats profiles rename', 'ats profiles delete', 'ats agents', 'ats models', 'ats mcp']) {
      assert.ok(top.stdout.includes(c), `${c} in\n${top.stdout}`);
    }
    assert.match(top.stdout, /Exit codes: 0 .*1 the run failed, 3 the run was stopped/s);
    const run = await ats(['run', '--help']);
    assert.equal(run.code, 0);
    assert.match(run.stdout, /^Usage: ats run <task> \[options\]/);
    for (const o of ['--agent <name>', '--model <model>', '--file <path>...', '--session <id>', '-f, --follow', '--json', '--api-key <key>']) assert.ok(run.stdout.includes(o), `${o} in\n${run.stdout}`);
    const group = await ats(['browsers', '--help']);
    assert.match(group.stdout, /ats browsers stop <browser-id>/);

    const missing = await ats(['run']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^ats: missing <task>\nRun 'ats run --help' for usage\./);
    const unknown = await ats(['runs', 'frobnicate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'runs frobnicate'/);
    const badOption = await ats(['runs', 'list', '--colour']);
    assert.equal(badOption.code, 2);
    assert.match(badOption.stderr, /unknown option '--colour'/);
    const noKey = await ats(['agents'], { env: { PATH: process.env.PATH!, ATS_BASE_URL: h.env.ATS_BASE_URL! } });
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /no API key: set ATS_API_KEY or pass --api-key/);
  });

  test('when a run is followed, then each step is a plain line as it happens, then the result, and the exit code is 0', async () => {
    const r = await ats(['run', TABLE_TASK(), '--model', 'builtin', '--follow']);
    assert.equal(r.code, 0, show(r));
    assert.ok(!r.stdout.includes(ESC) && !r.stderr.includes(ESC), 'no escape codes when piped');
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^run_\S+ \(browser-agent\)$/);
    const steps = lines.filter((l) => l.startsWith('step '));
    assert.match(steps[0]!, new RegExp(`^step 1  navigate ${site}/run-table\\.html  `));
    assert.ok(steps.length >= 2, r.stdout);
    assert.ok(lines.indexOf(steps[0]!) < lines.findIndex((l) => l.startsWith('✓ completed')), 'steps come before the end');
    assert.match(r.stdout, new RegExp(`✓ completed in \\S+ · ${steps.length} steps\\n`));
    // The answer is the table, last.
    const answer = r.stdout.slice(r.stdout.indexOf('✓ completed'));
    assert.match(answer, /Lamp/);
    assert.match(answer, /140/);
    assert.equal(r.stderr, '');
  });

  test('when a run is not followed, then only its answer is printed (stdout) and --json gives the run', async () => {
    const quiet = await ats(['run', `Open ${site}/run-table.html. Read the heading.`, '--model', 'builtin']);
    assert.equal(quiet.code, 0, show(quiet));
    assert.equal(quiet.stdout.trim(), 'Price list');
    assert.equal(quiet.stderr, '');

    const run = json<{ id: string; status: string; result: string; agent: string; sessionId: string }>(await ats(['run', TABLE_TASK(), '--model', 'builtin', '--json']));
    assert.equal(run.status, 'completed');
    assert.equal(run.agent, 'browser-agent');
    assert.match(run.result, /Chair/);

    const got = json<typeof run>(await ats(['runs', 'get', run.id, '--json']));
    assert.deepEqual({ id: got.id, status: got.status, result: got.result }, { id: run.id, status: 'completed', result: run.result });
    const human = await done(['runs', 'get', run.id]);
    assert.match(human.stdout, new RegExp(`^id: +${run.id}\\n`));
    assert.match(human.stdout, /\nstatus: +completed\n/);
    assert.ok(human.stdout.endsWith(`\n\n${run.result}\n`));

    const listed = json<{ id: string }[]>(await ats(['runs', 'list', '--json', '--status', 'completed']));
    assert.ok(listed.some((r) => r.id === run.id));
    const table = await done(['runs', 'list', '--limit', '2']);
    assert.match(table.stdout, /^ID +STATUS +CREATED +TASK\n/);
    assert.equal(table.stdout.trimEnd().split('\n').length, 3, table.stdout);

    const steps = json<{ number: number; action: string }[]>(await ats(['runs', 'steps', run.id, '--json']));
    assert.deepEqual(steps.map((s) => s.number), steps.map((_, i) => i + 1));
    assert.match(steps[0]!.action, /^navigate /);
    const events = json<{ type: string }[]>(await ats(['runs', 'events', run.id, '--json']));
    assert.equal(events.at(-1)!.type, 'run.completed');
    assert.ok(events.some((e) => e.type === 'step'));

    // A follow-up in the same session.
    const follow = json<{ sessionId: string; status: string; result: string }>(await ats(['run', 'Read the heading.', '--session', run.sessionId, '--model', 'builtin', '--json']));
    assert.equal(follow.sessionId, run.sessionId);
    assert.equal(follow.result, 'Price list');
  });

  test('when --follow and --json are given, then every event is a JSON line and the run is the last one', async () => {
    const r = await ats(['run', TABLE_TASK(), '--model', 'builtin', '--follow', '--json']);
    assert.equal(r.code, 0, show(r));
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { type?: string; status?: string; id: string | number });
    const run = lines.pop()!;
    assert.equal(run.status, 'completed');
    assert.equal(lines[0]!.type, 'run.queued');
    assert.equal(lines.at(-1)!.type, 'run.completed');
    assert.ok(lines.filter((e) => e.type === 'step').length >= 2);
  });

  test('when a run fails, then the reason is on stderr and the exit code is 1', async () => {
    const r = await ats(['run', 'Fly me to the moon.', '--model', 'builtin', '--follow']);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stdout, /✗ failed/);
    assert.match(r.stderr, /^ats: run run_\S+ failed: .+/m);
    const j = await ats(['run', 'Fly me to the moon.', '--model', 'builtin', '--json']);
    assert.equal(j.code, 1);
    assert.equal((JSON.parse(j.stdout) as { status: string }).status, 'failed');
  });

  test('when a followed run is stopped from another shell, then the follower says so and exits 3', async () => {
    const child = spawn(process.execPath, [BIN, 'run', 'Run `sleep 60`.', '--agent', 'browsercode', '--model', 'builtin', '--follow'], { cwd: WORK, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('close', r));
    // The command is running once its tool call is shown.
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        stdout += d;
        if (stdout.includes('▸ $ sleep 60')) resolve();
      });
      child.on('close', () => reject(new Error(`ats exited early:\n${stdout}\n${stderr}`)));
    });
    const id = /^(run_\S+) \(browsercode\)$/m.exec(stdout)![1]!;
    const stop = await ats(['runs', 'stop', id, '--agent', 'browsercode']);
    assert.equal(stop.code, 0, show(stop));
    assert.equal(stop.stdout, `${id} stopped\n`);
    assert.equal(await exited, 3, `${stdout}\n${stderr}`);
    assert.match(stdout, /■ stopped/);
    assert.match(stderr, new RegExp(`ats: run ${id} was stopped`));

    const again = await ats(['runs', 'stop', id, '--agent', 'browsercode']);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /409 Run already stopped/);
    const wait = await ats(['runs', 'wait', id, '--agent', 'browsercode']);
    assert.equal(wait.code, 3);
  });

  test('when a run is detached, then its id is printed at once, and waiting with a short --timeout exits 4 and says how to go on', async () => {
    const r = await ats(['run', 'Run `sleep 30`.', '--agent', 'browsercode', '--model', 'builtin', '--detach']);
    assert.equal(r.code, 0, show(r));
    const id = r.stdout.trim();
    assert.match(id, /^run_\S+$/);
    const w = await ats(['runs', 'wait', id, '--agent', 'browsercode', '--timeout', '1']);
    assert.equal(w.code, 4, show(w));
    assert.ok(w.stderr.includes(`--timeout 1s passed; the run goes on: \`ats runs wait ${id} --agent browsercode\`, or stop it with \`ats runs stop ${id} --agent browsercode\``), w.stderr);
    assert.equal((await ats(['runs', 'stop', id, '--agent', 'browsercode'])).code, 0);
  });

  test('when a resource does not exist or the key is wrong, then the API detail and request id are on stderr, never the key, and the exit code is 2', async () => {
    const r = await ats(['runs', 'get', 'run_doesnotexist']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^ats: 404 Run not found — GET \/api\/v1\/agents\/browser-agent\/runs\/run_doesnotexist \(request id [0-9a-f-]{36}\)\n$/);
    const other = await ats(['runs', 'get', 'run_doesnotexist', '--agent', 'nope']);
    assert.match(other.stderr, /404 Agent not found/);

    const wrong = 'ats_wrong_key_that_must_never_be_printed';
    const bad = await ats(['agents', '--api-key', wrong]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /401 Invalid or missing API key/);
    assert.ok(!bad.stderr.includes(wrong) && !bad.stdout.includes(wrong));

    // Another project's run is not found either.
    const mine = json<{ id: string }>(await ats(['run', `Open ${site}/run-table.html. Read the heading.`, '--model', 'builtin', '--json']));
    const theirs = await ats(['runs', 'get', mine.id], { env: userEnv({ ATS_API_KEY: h.env.ATS_TEST_OTHER_KEY! }) });
    assert.equal(theirs.code, 2);
    assert.match(theirs.stderr, /404 Run not found/);
    assert.ok(!theirs.stderr.includes(h.env.ATS_TEST_OTHER_KEY!));

    const invalid = await ats(['browsers', 'create', '--width', '100', '--height', '100']);
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /^ats: 422 body\.screen_width: .*; body\.screen_height: .* \(request id /);

    const down = await ats(['agents', '--base-url', 'http://127.0.0.1:1']);
    assert.equal(down.code, 2);
    assert.match(down.stderr, /^ats: Connection error/);
  });

  test('when files are uploaded and attached, then the agent reads them, and its output files download', async () => {
    const notes = path.join(WORK, 'notes.txt');
    fs.writeFileSync(notes, 'quiet words\n');
    const up = json<{ id: string; name: string }[]>(await ats(['files', 'upload', notes, '--agent', 'browsercode', '--json']));
    assert.equal(up.length, 1);
    assert.equal(up[0]!.name, 'notes.txt');
    assert.match(up[0]!.id, /^file_/);

    const run = json<{ id: string; status: string; missingFileIds: string[] }>(
      await ats(['run', 'Run `tr a-z A-Z < notes.txt > loud.txt`.', '--agent', 'browsercode', '--model', 'builtin', '--attach', up[0]!.id, '--json']),
    );
    assert.equal(run.status, 'completed');
    assert.deepEqual(run.missingFileIds, []);
    const listed = await done(['runs', 'files', run.id, '--agent', 'browsercode']);
    assert.match(listed.stdout, /^NAME +KIND +SIZE +ID\n/);
    assert.match(listed.stdout, /\nloud\.txt +output +12 B +file_/);
    assert.match(listed.stdout, /\nnotes\.txt +input +12 B +file_/);

    const out = path.join(WORK, 'out');
    const got = await ats(['files', 'download', run.id, '--agent', 'browsercode', '--kind', 'output', '--out', out]);
    assert.equal(got.code, 0, show(got));
    assert.equal(got.stdout, `${path.join(out, 'loud.txt')}\n`);
    assert.equal(fs.readFileSync(path.join(out, 'loud.txt'), 'utf8'), 'QUIET WORDS\n');

    // --file uploads and attaches in one go; a download URL from --json downloads by itself.
    const viaFile = json<{ id: string; status: string }>(await ats(['run', 'Run `wc -c < notes.txt`.', '--agent', 'browsercode', '--model', 'builtin', '--file', notes, '--json']));
    assert.equal(viaFile.status, 'completed');
    const files = json<{ name: string; kind: string; downloadUrl: string }[]>(await ats(['runs', 'files', viaFile.id, '--agent', 'browsercode', '--kind', 'input', '--json']));
    assert.deepEqual(files.map((f) => [f.name, f.kind]), [['notes.txt', 'input']]);
    const single = path.join(WORK, 'copy.txt');
    const byUrl = await ats(['files', 'download', files[0]!.downloadUrl, '--out', single]);
    assert.equal(byUrl.code, 0, show(byUrl));
    assert.equal(fs.readFileSync(single, 'utf8'), 'quiet words\n');

    const missing = await ats(['run', 'hi', '--file', path.join(WORK, 'nope.txt')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--file .*nope\.txt: no such file/);
  });

  test('when a browser is created, then its CDP and live view URLs are printed, a live view link is made, and it stops', async () => {
    const b = json<{ id: string; status: string; cdpUrl: string; liveViewUrl: string | null }>(await ats(['browsers', 'create', '--json']));
    assert.equal(b.status, 'active');
    assert.match(b.cdpUrl, /^wss?:\/\//);
    // Null only when the live-view service could not mint it in time (a loaded machine); a get mints it again.
    if (b.liveViewUrl !== null) assert.match(b.liveViewUrl, /^https?:\/\/.+token=/);

    const listed = await done(['browsers', 'list', '--status', 'active']);
    assert.match(listed.stdout, new RegExp(`\\n${b.id} +active `));
    const link = await ats(['browsers', 'live-view', b.id, '--mode', 'view']);
    assert.equal(link.code, 0, show(link));
    assert.match(link.stdout, /^https?:\/\/\S+token=\S+\n$/);
    const human = await done(['browsers', 'get', b.id]);
    assert.match(human.stdout, /\ncdp url: +wss?:\/\//);
    assert.match(human.stdout, /\nlive view: +https?:\/\/\S+token=\S+\n/);

    const stop = await done(['browsers', 'stop', b.id]);
    assert.equal(stop.stdout, `${b.id} stopped\n`);
    const after = json<{ status: string; stoppedAt: string | null }>(await ats(['browsers', 'get', b.id, '--json']));
    assert.equal(after.status, 'stopped');
    assert.ok(after.stoppedAt);

    // Its recording, once finished (409 while it is being finalised), as a link and as the MP4.
    const rec = await until(async () => {
      const r = await ats(['browsers', 'recording', b.id]);
      if (r.code !== 0) assert.match(r.stderr, /409 /, show(r));
      return r.code === 0 && r;
    }, { timeoutMs: 60_000, intervalMs: 500, what: 'the recording' });
    assert.match(rec.stdout, /^https?:\/\/\S+\n$/);
    const mp4 = path.join(WORK, 'video.mp4');
    assert.equal((await done(['browsers', 'recording', b.id, '--out', mp4])).stdout, `${mp4}\n`);
    assert.equal(fs.readFileSync(mp4).subarray(4, 8).toString('latin1'), 'ftyp', 'an MP4 file');
  });

  test('when profiles are created, renamed and deleted, then the list follows, and a deleted one is not found', async () => {
    const p = json<{ id: string; name: string; userId: string | null }>(await ats(['profiles', 'create', 'work', '--user-id', 'u-1', '--json']));
    assert.equal(p.name, 'work');
    assert.equal(p.userId, 'u-1');
    const list = await done(['profiles', 'list']);
    assert.match(list.stdout, new RegExp(`\\n${p.id} +work +u-1 `));
    const renamed = await done(['profiles', 'rename', p.id, 'home']);
    assert.equal(renamed.stdout, `${p.id} home\n`);
    assert.equal(json<{ name: string }>(await ats(['profiles', 'get', p.id, '--json'])).name, 'home');
    const del = await ats(['profiles', 'delete', p.id]);
    assert.equal(del.code, 0, show(del));
    const gone = await ats(['profiles', 'get', p.id]);
    assert.equal(gone.code, 2);
    assert.match(gone.stderr, /404 Profile not found/);
    assert.ok(!json<{ id: string }[]>(await ats(['profiles', 'list', '--json'])).some((x) => x.id === p.id));
  });

  test('when the agents are listed, then both are named with what they are for', async () => {
    const agents = json<{ name: string; watch: string }[]>(await ats(['agents', '--json']));
    assert.deepEqual(agents.map((a) => [a.name, a.watch]).sort(), [['browser-agent', 'steps'], ['browsercode', 'events']]);
    const human = await done(['agents']);
    assert.match(human.stdout, /^browser-agent  browser, files · disposable sessions · watch steps\n {2}best for: /);
  });

  test('when the models are listed, then builtin is among them and the default is marked', async () => {
    const offered = json<{ models: { name: string; default: boolean }[]; default: string }>(await ats(['models', '--json']));
    assert.deepEqual(offered.models.filter((m) => m.default).map((m) => m.name), [offered.default]);
    const human = await done(['models']);
    assert.match(human.stdout, /^builtin {2}builtin/m);
    assert.match(human.stdout, new RegExp(`^${offered.default} .*· default$`, 'm'));
  });
});

describe('ats on a terminal', () => {
  /** Runs `ats` on a pseudo-terminal (util-linux `script`) and returns what the terminal received. */
  function onTerminal(args: string[], name: string): Promise<{ code: number | null; screen: string }> {
    const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const file = path.join(ARTIFACTS, `${name}.typescript`);
    return new Promise((resolve, reject) => {
      // -e: the command's exit code; -f: flush as it goes; the transcript is the terminal's bytes.
      const child = spawn('script', ['-qfec', `stty cols 100 rows 30; ${quoted}`, file], { cwd: WORK, env: userEnv({ TERM: 'xterm-256color' }), stdio: ['pipe', 'ignore', 'inherit'] });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, screen: fs.readFileSync(file, 'utf8') }));
    });
  }

  test('when Ctrl-C is pressed while a run is followed, then ats stops watching, says how to go on, and exits 130; the run goes on', async () => {
    const quoted = [process.execPath, BIN, 'run', 'Run `sleep 30`.', '--agent', 'browsercode', '--model', 'builtin', '--follow'].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const file = path.join(ARTIFACTS, 'run-interrupt.typescript');
    const child = spawn('script', ['-qfec', `stty cols 100 rows 30; ${quoted}`, file], { cwd: WORK, env: userEnv({ TERM: 'xterm-256color' }), stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((r) => child.on('close', r));
    let seen = '';
    // Ctrl-C once the command runs: the terminal turns it into SIGINT for ats.
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        seen += d;
        if (seen.includes('$ sleep 30')) resolve();
      });
      child.on('close', () => reject(new Error(`ats exited early:\n${seen}`)));
    });
    child.stdin.write('\x03');
    assert.equal(await exited, 130, seen);
    const lines = rendered(fs.readFileSync(file, 'utf8'));
    fs.writeFileSync(path.join(ARTIFACTS, 'run-interrupt.txt'), lines.join('\n'));
    const id = /^(run_\S+) \(browsercode\)$/m.exec(lines.join('\n'))![1]!;
    assert.ok(lines.includes(`ats: interrupted; the run goes on: \`ats runs wait ${id} --agent browsercode\`, or stop it with \`ats runs stop ${id} --agent browsercode\``), lines.join('\n'));
    const still = json<{ status: string }>(await ats(['runs', 'get', id, '--agent', 'browsercode', '--json']));
    assert.equal(still.status, 'running');
    assert.equal((await ats(['runs', 'stop', id, '--agent', 'browsercode'])).code, 0);
  });

  /** The lines a person sees at the end: \r returns to the line's start, ESC[2K clears it, colours vanish. */
  function rendered(raw: string): string[] {
    const out: string[] = [];
    for (const physical of raw.replace(/^Script started.*\n/, '').replace(/\nScript done.*\n?$/, '').split(/\r?\n/)) {
      let line = '';
      for (const part of physical.split(/(\r|\x1b\[2K)/)) {
        if (part === '\r') continue;
        if (part === '\x1b[2K') line = '';
        else line += part;
      }
      out.push(line.replace(/\x1b\[[0-9;]*m/g, ''));
    }
    return out;
  }

  test('when a run is followed on a terminal, then a spinner counts its steps in place and the steps and result stay on screen', async () => {
    const { code, screen } = await onTerminal(['run', TABLE_TASK(), '--model', 'builtin', '--follow'], 'run-follow');
    assert.equal(code, 0, screen);
    // The spinner: a braille frame redrawn in place, with the status, the step counter and the time.
    assert.match(screen, /\r\x1b\[2K\x1b\[36m[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\x1b\[39m (queued|running) · 0 steps · /);
    assert.match(screen, /\r\x1b\[2K\x1b\[36m[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\x1b\[39m running · [12] steps? · \d/);
    // Colours on a terminal (the step label in cyan, "completed" in green).
    assert.match(screen, /\x1b\[36mstep 1\x1b\[39m/);
    assert.match(screen, /\x1b\[32mcompleted\x1b\[39m/);
    const lines = rendered(screen);
    fs.writeFileSync(path.join(ARTIFACTS, 'run-follow.txt'), lines.join('\n'));
    // What stays on screen: the header, the steps, the end, the answer; the spinner line is gone.
    assert.match(lines[0]!, /^run_\S+ \(browser-agent\)$/);
    assert.ok(lines.some((l) => /^step 1 {2}navigate /.test(l)));
    const end = lines.findIndex((l) => /^✓ completed in \S+ · \d steps$/.test(l));
    assert.ok(end > 0, lines.join('\n'));
    assert.ok(!lines.some((l) => /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/.test(l)), 'the spinner line is cleared at the end');
    assert.match(lines.slice(end + 1).join('\n'), /Lamp/);
  });

  test('when a run is not followed on a terminal, then the spinner alone shows progress and the answer is printed', async () => {
    const { code, screen } = await onTerminal(['run', `Open ${site}/run-table.html. Read the heading.`, '--model', 'builtin'], 'run-quiet');
    assert.equal(code, 0, screen);
    assert.match(screen, /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\x1b\[39m (queued|running) · \d steps? · /);
    const lines = rendered(screen).filter((l) => l !== '');
    fs.writeFileSync(path.join(ARTIFACTS, 'run-quiet.txt'), lines.join('\n'));
    assert.equal(lines.length, 2, lines.join('\n'));
    assert.match(lines[0]!, /^✓ run_\S+ completed in \S+ · 2 steps$/);
    assert.equal(lines[1], 'Price list');
  });
});
