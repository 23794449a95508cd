/**
 * The Python SDK (clients/python) against a real stack: the package is pip-installed into a fresh
 * virtual environment of Debian's python3 (with its httpx and pytest: `--system-site-packages`,
 * `--no-index --no-build-isolation`, as a user without PyPI does), then its pytest suite runs with
 * the client harness's environment. Each pytest test is reported here as a subtest, so the counts
 * and the failures show in this runner's output.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startClientHarness, type ClientHarness } from './support/client-harness.js';
import { tempDir } from './support/infra.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGE = path.join(ROOT, 'clients/python');
const PYTHON = '/usr/bin/python3';

let harness: ClientHarness;
let work: string;

/** Runs a command to its end without blocking this process (the harness's proxy and control server live here). */
function run(cmd: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

interface Case {
  id: string;
  seconds: number;
  outcome: 'passed' | 'failed' | 'skipped';
  message: string;
}

const unescape = (s: string) =>
  s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&#10;/g, '\n').replace(/&#13;/g, '\r').replace(/&amp;/g, '&');

/** The test cases of pytest's JUnit XML report. */
function readJunit(xml: string): Case[] {
  const cases: Case[] = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const get = (name: string) => unescape(new RegExp(`\\b${name}="([^"]*)"`).exec(m[1]!)?.[1] ?? '');
    const body = m[3] ?? '';
    const problem = /<(failure|error)\b([^>]*)>([\s\S]*?)<\/\1>|<(failure|error)\b([^>]*)\/>/.exec(body);
    const skipped = /<skipped\b([^>]*)/.exec(body);
    cases.push({
      id: `${get('classname')}::${get('name')}`,
      seconds: Number(get('time')),
      outcome: problem ? 'failed' : skipped ? 'skipped' : 'passed',
      message: problem ? unescape(problem[3] ?? problem[2] ?? problem[5] ?? '') : skipped ? unescape(skipped[1] ?? '') : '',
    });
  }
  return cases;
}

before(async () => {
  // Loopback receivers: the webhook tests listen on 127.0.0.1.
  harness = await startClientHarness({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  work = tempDir('python-sdk');
});

after(async () => {
  await harness?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test('the Python SDK: pip-installed into a fresh venv, its pytest suite passes against the stack', { timeout: 600_000 }, async (t) => {
  const venv = path.join(work, 'venv');
  const installing = Date.now();
  const made = await run(PYTHON, ['-m', 'venv', '--system-site-packages', venv], { cwd: work });
  assert.equal(made.code, 0, `python3 -m venv failed:\n${made.output}`);
  const pip = await run(path.join(venv, 'bin/pip'), ['install', '--no-index', '--no-build-isolation', '--quiet', './clients/python'], { cwd: ROOT });
  assert.equal(pip.code, 0, `pip install ./clients/python failed:\n${pip.output}`);
  t.diagnostic(`venv and pip install: ${((Date.now() - installing) / 1000).toFixed(1)} s`);

  const junit = path.join(work, 'junit.xml');
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1', ...harness.env };
  const started = Date.now();
  const pytest = await run(path.join(venv, 'bin/python'), ['-m', 'pytest', '-p', 'no:cacheprovider', '-rfEs', `--junitxml=${junit}`, 'tests'], { cwd: PACKAGE, env });
  const summary = pytest.output.trim().split('\n').at(-1) ?? '';
  t.diagnostic(`pytest: ${summary} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  const cases = fs.existsSync(junit) ? readJunit(fs.readFileSync(junit, 'utf8')) : [];
  assert.ok(cases.length > 0, `pytest ran no test (exit ${pytest.code}):\n${pytest.output}`);

  for (const c of cases) {
    await t.test(`${c.id} (${c.seconds.toFixed(1)} s)`, () => {
      // Every test needs the stack that is here: a skip means the environment did not reach pytest.
      assert.notEqual(c.outcome, 'skipped', `skipped: ${c.message}`);
      if (c.outcome === 'failed') assert.fail(c.message);
    });
  }
  assert.equal(pytest.code, 0, `pytest exited ${pytest.code}:\n${pytest.output}`);
});
