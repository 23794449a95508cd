/**
 * Runs the tests with Node's built-in runner: unit tests beside the code and integration
 * tests in test/. `unit` or `integration` runs one group; file paths after it run only those.
 * Exits non-zero on any failure, and ends with the files' times, slowest first: wall clock and,
 * where GNU time is installed, the CPU of the file with every process it started.
 *
 * Each file runs in its own runner. ATS_TEST_CONCURRENCY (default 2) is how many files run at once
 * (see runAll for the order); the integration files in ALONE have no other stack beside them. Most of
 * a file's time is waiting (on processes, pages, timers): one at a time kept two cores about 60 %
 * busy. On this two-core machine two at once took the integration files from 927 s to 735 s, every
 * one passing. ATS_TEST_BUILD is a shell command that makes what the integration files need
 * (`make test` sets it): it runs first, beside unit files, and a failed build fails the run.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './stack.js';

function find(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name === 'data' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) find(p, out);
    else if (e.name.endsWith('.test.ts')) out.push(path.relative(ROOT, p));
  }
  return out;
}

/**
 * Integration files with no other stack beside them: the ones that measure the machine (how many
 * browsers fit; how soon a dead pool replica's browsers read stopped, with two replicas of every
 * service), and the files whose bursts of browsers must each start within a create's deadline.
 * (The run and recording takeover files run beside another stack: recordings were taken over
 * 2.8–3.2 s after a kill there, against the 5 s they are held to.)
 */
const ALONE = new Set([
  'test/capacity.test.ts',
  'test/browsers-replicas.test.ts',
  // Bursts of browsers each created within its deadline (seven at once; fifteen coming and going, four at a time): beside another
  // stack on two saturated cores, creates took over 40 s (the launch queue's bound) and 55 s (the gateway's).
  'test/live-view-burst.test.ts',
  'test/recording-every-browser.test.ts',
  // Its examples start at once, each with a run or a browser: beside another stack, one's browser did not start and its run failed.
  'test/clients-python.test.ts',
]);

/**
 * Every process of the run (unit files, stacks' services) copies new PGlite data directories
 * from one template, built once (services/common/src/pglite-template.ts): initdb is ~10 s of CPU.
 */
process.env.PGLITE_TEMPLATES ??= path.join(ROOT, 'node_modules', '.cache', 'ats-pglite-templates');

const [which, ...only] = process.argv.slice(2);
const pick = (files: string[]) => (only.length ? files.filter((f) => only.includes(f)) : files);
const unit = pick(['services', 'gateway', 'scripts', 'dashboard'].flatMap((d) => find(path.join(ROOT, d))).sort());
const integration = pick(find(path.join(ROOT, 'test')).sort());
const concurrency = Math.max(1, Number(process.env.ATS_TEST_CONCURRENCY ?? 2) || 2);

/**
 * Whether the files started now run their TypeScript from dist/ (scripts/dist-loader.mjs, 0.3–0.6
 * CPU-s less per file than tsx): once this run's build is done, or when it has none. While tsc
 * writes dist/ a file could be read half written, so until then they run with tsx.
 */
let fromDist = !process.env.ATS_TEST_BUILD;

const nodeTest = (files: string[]) => [
  '--import',
  fromDist ? path.join(ROOT, 'scripts', 'dist-register.mjs') : 'tsx',
  '--test',
  // A backstop: every wait in a test has its own deadline, but a test that hangs anyway fails instead of stalling the run. It bounds a whole
  // file too (each file is one test of the runner), and browser-pool's unit file takes 10 min on a loaded machine: 30 min.
  '--test-timeout=1800000',
  '--test-reporter=spec',
  ...files,
];

interface FileResult {
  file: string;
  ok: boolean;
  ms: number;
  /** CPU seconds of the file's runner and every process it waited for (its stack's services, their Chromiums), when GNU time is installed. */
  cpuS?: number;
  /** A failed file's summary of its failing tests (the runner's own), repeated at the end of the run where a log's tail shows it. */
  failures?: string;
}

/**
 * The runner's "failing tests" section of a file's output (or its last lines), at most 60 lines,
 * then the error lines of a pytest run in it (`E   …`, which come after a long traceback).
 */
function failureSummary(output: string): string {
  const at = output.lastIndexOf('✖ failing tests:');
  // Stack frames left out: the message and the test's name are what a reader of a log's tail needs.
  const lines = (at >= 0 ? output.slice(at) : output).trimEnd().split('\n').filter((l) => !/^\s+at \S/.test(l));
  const head = at >= 0 ? lines.slice(0, 60) : lines.slice(-60);
  const pytest = [...new Set(lines.slice(60).filter((l) => /^\s*E\s{2,}\S/.test(l)).map((l) => l.trim()))].slice(0, 20);
  return [...head, ...(pytest.length ? ['  pytest errors:', ...pytest.map((l) => `    ${l}`)] : [])].join('\n');
}

/**
 * Where the run's temporary files go (every runner and what it starts gets it as TMPDIR): stacks'
 * data directories with their embedded database, browser profiles, recordings, run disks.
 * On a tmpfs (/dev/shm, when it has room) rather than the disk: measured here, a stack's services
 * started on 4.1–4.8 CPU-s in 3.2–3.8 s from /dev/shm against 5.5–6.2 CPU-s in 4.4–4.7 s from
 * /tmp on ext4 (each service copies a 25 MB database template, then writes to it). ATS_TEST_TMPDIR
 * names another folder; the run's own folder is removed at the end.
 */
const TMPFS_MAGIC = 0x01021994;
const TMPFS_ROOM = 4 * 1024 ** 3;
function testTmpDir(): string | undefined {
  if (process.env.ATS_TEST_TMPDIR) return process.env.ATS_TEST_TMPDIR;
  try {
    const s = fs.statfsSync('/dev/shm');
    if (s.type !== TMPFS_MAGIC || s.bavail * s.bsize < TMPFS_ROOM) return undefined;
    const dir = fs.mkdtempSync('/dev/shm/ats-test-');
    fs.chmodSync(dir, 0o1777); // as /tmp: browsers and commands run as uids of their own reach their folders in it
    return dir;
  } catch {
    return undefined;
  }
}
const runTmp = testTmpDir();
const ownTmp = runTmp !== undefined && !process.env.ATS_TEST_TMPDIR;
if (runTmp) process.env.TMPDIR = runTmp;
// Removed however the run ends: done, failed, thrown or interrupted (Ctrl-C, a CI timeout).
if (ownTmp) process.on('exit', () => fs.rmSync(runTmp!, { recursive: true, force: true }));
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

/** When the run began: each file's line says when in the run it ran, to see what ran beside what. */
const runStarted = Date.now();

/** GNU time, which gives a process's CPU with that of every descendant it waited for (Node's spawn does not). */
const GNU_TIME = fs.existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;
const cpuDir = GNU_TIME ? fs.mkdtempSync(path.join(os.tmpdir(), 'ats-test-cpu-')) : undefined;
if (cpuDir) process.on('exit', () => fs.rmSync(cpuDir, { recursive: true, force: true }));
let cpuFiles = 0;

/**
 * One job, a test file in its own runner or the build, under GNU time where installed; its output
 * is printed whole when it ends, so jobs running side by side don't interleave.
 */
function runJob(name: string, argv: string[], shown = name): Promise<FileResult> {
  const started = Date.now();
  const at = (t: number) => ((t - runStarted) / 1000).toFixed(0);
  process.stdout.write(`▶ ${shown}\n`);
  const cpuFile = cpuDir && path.join(cpuDir, `${cpuFiles++}`);
  const [cmd, ...args] = cpuFile ? [GNU_TIME!, '-o', cpuFile, '-f', '%U %S', ...argv] : argv;
  return new Promise((resolve) => {
    const child = spawn(cmd!, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => out.push(b));
    child.on('close', (code) => {
      const output = Buffer.concat(out).toString();
      const r: FileResult = { file: name, ok: code === 0, ms: Date.now() - started };
      if (cpuFile) {
        // The last line: an exit code other than 0 adds "Command exited with non-zero status N" before it.
        const [user, sys] = (fs.readFileSync(cpuFile, 'utf8').trim().split('\n').pop() ?? '').split(' ').map(Number);
        if (Number.isFinite(user) && Number.isFinite(sys)) r.cpuS = user! + sys!;
        fs.rmSync(cpuFile, { force: true });
      }
      if (!r.ok) r.failures = failureSummary(output);
      process.stdout.write(`\n== ${name} ${r.ok ? 'passed' : 'FAILED'} in ${(r.ms / 1000).toFixed(1)} s${r.cpuS !== undefined ? `, ${r.cpuS.toFixed(0)} CPU-s` : ''} (${at(started)}–${at(Date.now())} s of the run)\n${output}`);
      resolve(r);
    });
  });
}

const runFile = (file: string) => runJob(file, [process.execPath, ...nodeTest([file])]);

/** The build the integration files need (ATS_TEST_BUILD, a shell command; `make test` sets it). */
const runBuild = (command: string) => runJob('build', ['bash', '-c', command], `build: ${command}`);

/**
 * The integration files slowest first, as measured in a clean run here (53 s down to 3 s), in the
 * order each queue takes them (the STACKLESS ones among them in the unit files' lanes), so that the
 * run does not end on one long file with a core idle: a 48 s file last left one idle for 20 s, and
 * the 20 s files that sorted last by name (run-hygiene, recording-replicas) ended the run beside
 * short ones. A file not listed runs after these.
 */
const SLOW_FIRST = [
  'test/clients-typescript.test.ts',
  'test/runs.test.ts',
  'test/dashboard.test.ts',
  'test/run-takeover.test.ts',
  'test/readme-examples.test.ts',
  'test/recording.test.ts',
  'test/clients-cli.test.ts',
  'test/browsercode.test.ts',
  'test/browser-pool.test.ts',
  'test/run-hygiene.test.ts',
  'test/recording-recorder.test.ts',
  'test/recording-replicas.test.ts',
  'test/live-view.test.ts',
  'test/file-storage.test.ts',
  'test/fuzz.test.ts',
  'test/nats-outage.test.ts',
  'test/keys-cli.test.ts',
  'test/webhooks.test.ts',
  'test/clients-mcp.test.ts',
  'test/stacks-side-by-side.test.ts',
  'test/pool-restart.test.ts',
  'test/gateway.test.ts',
  'test/pool-owner-lost.test.ts',
  'test/gateway-replicas.test.ts',
  'test/up.test.ts',
  'test/replicas.test.ts',
  'test/deploy-manifests.test.ts',
  'test/internal-trust.test.ts',
];
const rank = (f: string) => (SLOW_FIRST.includes(f) ? SLOW_FIRST.indexOf(f) : SLOW_FIRST.length);
const slowFirst = (files: string[]) => [...files].sort((a, b) => rank(a) - rank(b));

/**
 * Unit files heavy on Chromium (the pool's own tests launch about 200 in 90 s, at normal speed):
 * they run in the build's lane, after the build and before the ALONE files, with only the light
 * unit files beside them. Beside the build they slowed it from 28 s to 46 s; last of the unit
 * files they reached the ALONE files' bursts (on a machine running 2.3 times slower, CI's
 * recording-every-browser and live-view-burst failed there: a create past the gateway's 55 s);
 * after the ALONE files they ran beside two integration files (the TypeScript examples' create
 * then failed 503).
 */
const HEAVY_UNIT = new Set(['services/browser-pool/src/browser-pool.test.ts']);

/**
 * Integration files that start no stack (no service process, no pool's Chromium) and run from the
 * sources: they run as unit files do, after them, beside the ALONE files. There the unit files ran
 * out with the ALONE files a minute from done (218 of 287 s, in a clean run here), and one core
 * sat idle while the last of them mostly waited.
 */
const STACKLESS = new Set([
  'test/boundaries.test.ts',
  'test/deploy-manifests.test.ts',
  'test/keys-cli.test.ts',
  'test/live-view-hub.test.ts',
  'test/recording-link.test.ts',
  'test/recording-recorder.test.ts',
]);

/**
 * Runs every file on two rules: at most `concurrency` integration files at once (the build counts
 * as one), and an ALONE file with no other stack beside it. A unit file starts no stack (most are
 * pure code, a few start a Chromium or a PGlite), and unit files run beside the rest:
 * - one lane runs the build (when `build` is given; the integration files run the compiled
 *   services), then the HEAVY_UNIT files, then the ALONE files one after another, then the other
 *   integration files;
 * - the other lanes run the light unit files, then the STACKLESS integration files, until the
 *   ALONE files are done (or wait for that once those are done), then take integration files too;
 * - once the ALONE files are done, one more lane runs the unit files left; the integration lanes
 *   take any left when no integration file is.
 * Measured here: the machine was 57 % busy during the ALONE files with nothing beside them, and
 * about 78 % with two integration files at once.
 */
async function runAll(unit: string[], alone: string[], integration: string[], build: string | undefined): Promise<FileResult[]> {
  const results: FileResult[] = [];
  const light = [...unit.filter((f) => !HEAVY_UNIT.has(f)), ...slowFirst(integration.filter((f) => STACKLESS.has(f)))];
  const heavy = unit.filter((f) => HEAVY_UNIT.has(f));
  let rest = slowFirst(integration.filter((f) => !STACKLESS.has(f)));
  let aloneDone = false;
  let markAloneDone!: () => void;
  const aloneFinished = new Promise<void>((resolve) => (markAloneDone = resolve));
  const run = async (f: string) => void results.push(await runFile(f));
  const takeRest = async () => {
    for (let f = rest.shift() ?? light.shift(); f; f = rest.shift() ?? light.shift()) await run(f);
  };
  const first = async () => {
    if (build) {
      const built = await runBuild(build);
      results.push(built);
      fromDist = built.ok;
      // Without the build the integration files cannot run: they are left out and the build's failure is reported.
      if (!built.ok) [alone, rest] = [[], []];
    }
    for (const f of heavy) await run(f);
    for (const f of alone) await run(f);
    aloneDone = true;
    markAloneDone();
    await takeRest();
  };
  const other = async () => {
    for (let f = light.shift(); f; f = aloneDone ? undefined : light.shift()) await run(f);
    // Out of unit files while an ALONE file runs: wait for it rather than start a stack beside it.
    await aloneFinished;
    await takeRest();
  };
  const extra = async () => {
    await aloneFinished;
    for (let f = light.shift(); f; f = light.shift()) await run(f);
  };
  await Promise.all([first(), ...Array.from({ length: concurrency - 1 }, other), ...(concurrency > 1 ? [extra()] : [])]);
  return results;
}

/** The files slowest first (at most `top`), their wall time and CPU, and why each failed one failed. */
function report(phase: string, results: FileResult[], top = results.length): boolean {
  const sorted = [...results].sort((a, b) => b.ms - a.ms);
  const cpu = results.every((r) => r.cpuS !== undefined) ? results.reduce((a, r) => a + r.cpuS!, 0) : undefined;
  const row = (r: FileResult) => `${r.ok ? '  ' : '✖ '}${(r.ms / 1000).toFixed(1).padStart(7)} s${r.cpuS !== undefined ? `${r.cpuS.toFixed(0).padStart(6)} CPU-s` : ''}  ${r.file}`;
  const shown = sorted.filter((r, i) => i < top || !r.ok);
  process.stdout.write(
    `\n== ${phase} files by time${shown.length < sorted.length ? ` (the ${top} slowest)` : ''}${cpu !== undefined ? `; ${cpu.toFixed(0)} CPU-s in all` : ''}\n${shown.map(row).join('\n')}\n`,
  );
  const failed = results.filter((r) => !r.ok);
  for (const r of failed) process.stdout.write(`\n== why ${r.file} failed\n${r.failures}\n`);
  if (failed.length) process.stdout.write(`\n✖ failing ${phase} files:\n${failed.map((r) => `  ${r.file}`).join('\n')}\n`);
  return !failed.length;
}

async function main(): Promise<void> {
  if (runTmp) process.stdout.write(`== temporary files in ${runTmp}\n`);
  const runUnit = which !== 'integration' ? unit : [];
  const runIntegration = which !== 'unit' ? integration : [];
  const alone = runIntegration.filter((f) => ALONE.has(f));
  // The build only where integration files run (their stacks run the compiled services); unit files run from the sources meanwhile.
  const build = runIntegration.length ? process.env.ATS_TEST_BUILD || undefined : undefined;
  process.stdout.write(
    `\n== ${runUnit.length} unit and ${runIntegration.length} integration files, ${concurrency} at a time` +
      `${build ? '; the build first, beside unit files' : ''}${alone.length ? `; ${alone.length} integration files alone (unit files beside them)` : ''}\n`,
  );
  const results = await runAll(
    runUnit,
    alone,
    runIntegration.filter((f) => !ALONE.has(f)),
    build,
  );
  const built = results.find((r) => r.file === 'build');
  const unitResults = results.filter((r) => runUnit.includes(r.file));
  const integrationResults = [...(built ? [built] : []), ...results.filter((r) => runIntegration.includes(r.file))];
  // The unit files' report after the integration files' too: a log's tail shows both.
  let ok = unitResults.length ? report('unit', unitResults, 15) : true;
  if (integrationResults.length) ok = report('integration', integrationResults) && ok;
  if (built && !built.ok) process.stdout.write(`\n✖ the build failed: the ${runIntegration.length} integration files did not run\n`);
  process.stdout.write(`\n== ${ok ? 'all tests passed' : 'tests FAILED'} in ${((Date.now() - runStarted) / 1000).toFixed(0)} s\n`);
  process.exit(ok ? 0 : 1);
}

void main();
