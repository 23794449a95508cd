/**
 * `ats`, the command line of the Agent Task Service: runs a task and shows it as it goes, and
 * reads and manages runs, browsers, files and profiles, all through the SDK's public surface.
 *
 * Quiet when piped, friendly on a terminal: a spinner and a step counter appear only on a
 * terminal; `--json` prints machine output on stdout alone. The exit code says how the work
 * ended (see EXIT).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AgentTaskService } from './index.js';
import type { Agent, Browser, Event, Profile, Run, Step } from './index.js';
import { bytes, clip, colorsFor, duration, fields, Spinner, Style, table, when, type Streams } from './cli-terminal.js';

/** Exit codes: how the work ended, for scripts. */
export const EXIT = {
  /** Done; for a run: it completed. */
  ok: 0,
  /** The run failed. */
  failed: 1,
  /** A usage error, or the API (or the network) refused the call. */
  error: 2,
  /** The run was stopped. */
  stopped: 3,
  /** `--timeout` passed before the run ended (it goes on). */
  timeout: 4,
  /** Interrupted (Ctrl-C) while watching a run (it goes on). */
  interrupted: 130,
} as const;

const VERSION = '0.1.0';
const AGENTS = ['browser-agent', 'browsercode'] as const;
type AgentName = (typeof AGENTS)[number];

/** What main reads and writes; the process's own by default. */
export interface CliIo extends Streams {
  env: Record<string, string | undefined>;
  /** Resolves when the user interrupts (Ctrl-C); the default listens for SIGINT. */
  interrupted?: () => Promise<void>;
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: Command,
  ) {
    super(message);
  }
}

// ---------- the command table ----------

type Values = Record<string, string | boolean | string[] | undefined>;

interface Option {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** The value's name in the help ("<id>"); booleans have none. */
  arg?: string;
  describe: string;
}

interface Ctx {
  io: CliIo;
  style: Style;
  json: boolean;
  values: Values;
  args: string[];
  client(): AgentTaskService;
  out(text: string): void;
  err(text: string): void;
  /** Prints `value` as JSON on stdout. */
  printJson(value: unknown): void;
  /** The terminal's width when stdout is one (tables fit it). */
  width?: number;
}

interface Command {
  path: string[];
  /** The positional arguments, as the usage line shows them. */
  params?: string;
  summary: string;
  /** More lines of help below the summary. */
  details?: string;
  options?: Record<string, Option>;
  /** Positional argument count [min, max]. */
  arity?: [number, number];
  run(ctx: Ctx): Promise<number>;
}

const GLOBAL: Record<string, Option> = {
  'api-key': { type: 'string', arg: '<key>', describe: 'API key (default: $ATS_API_KEY)' },
  'base-url': { type: 'string', arg: '<url>', describe: 'Server root, e.g. http://localhost:8080 (default: $ATS_BASE_URL)' },
  json: { type: 'boolean', describe: 'Machine output: JSON on stdout only' },
  help: { type: 'boolean', short: 'h', describe: 'Show help' },
  version: { type: 'boolean', describe: 'Print the version' },
};

const agentOpt: Option = { type: 'string', arg: '<name>', describe: 'browser-agent (default) or browsercode' };

const str = (v: Values, k: string): string | undefined => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
const list = (v: Values, k: string): string[] => (Array.isArray(v[k]) ? (v[k] as string[]) : []);

function agentOf(v: Values): AgentName {
  const a = str(v, 'agent') ?? 'browser-agent';
  // An unknown agent is left to the API to refuse (404 Agent not found), naming what exists.
  return a as AgentName;
}

function intOf(v: Values, k: string, min: number, max: number): number | undefined {
  const s = str(v, k);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${k} must be an integer from ${min} to ${max}`);
  return n;
}

function secondsOf(v: Values, k: string): number | undefined {
  const s = str(v, k);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${k} must be a number of seconds above 0`);
  return n;
}

const COMMANDS: Command[] = [
  {
    path: ['run'],
    params: '<task>',
    summary: 'Run a task and print its answer',
    details: [
      'Starts a run, waits for it to end and prints its result. On a terminal a spinner counts the',
      'steps; --follow also prints each step (browser-agent) or event (browsercode) as it happens.',
      'Exit code: 0 completed, 1 failed, 3 stopped, 4 --timeout passed, 2 usage or API error.',
      'With --json: the final run as JSON (with --follow, each event as a JSON line before it).',
      '',
      'Examples:',
      '  ats run "Open https://example.com. Read the heading." --follow',
      '  ats run "Summarise report.csv" --agent browsercode --file report.csv',
      '  ats run "Now open the second link" --session ses_…',
    ].join('\n'),
    arity: [1, 1],
    options: {
      agent: agentOpt,
      model: { type: 'string', arg: '<model>', describe: 'Model to run it with (default: the service default)' },
      file: { type: 'string', multiple: true, arg: '<path>', describe: 'Upload and attach a file (repeatable)' },
      attach: { type: 'string', multiple: true, arg: '<file-id>', describe: 'Attach a file uploaded before (`ats files upload`; repeatable)' },
      session: { type: 'string', arg: '<id>', describe: 'Follow-up in this session (sessionId of an earlier run)' },
      workspace: { type: 'string', arg: '<id>', describe: 'browsercode: run on this workspace’s disk' },
      profile: { type: 'string', arg: '<id>', describe: 'Browser profile to start the browser with' },
      'proxy-country': { type: 'string', arg: '<cc>', describe: 'Browse through a proxy of this country (e.g. de)' },
      follow: { type: 'boolean', short: 'f', describe: 'Print each step or event as it happens' },
      detach: { type: 'boolean', short: 'd', describe: 'Print the new run and return at once' },
      timeout: { type: 'string', arg: '<seconds>', describe: 'Stop waiting after this long (exit 4; the run goes on)' },
    },
    async run(ctx) {
      const v = ctx.values;
      const agent = agentOf(v);
      const browser = {
        ...(str(v, 'profile') ? { profileId: str(v, 'profile') } : {}),
        ...(str(v, 'proxy-country') ? { proxyCountryCode: str(v, 'proxy-country') } : {}),
      };
      const files = list(v, 'file');
      for (const f of files) if (!fs.existsSync(f)) throw new UsageError(`--file ${f}: no such file`);
      const timeout = secondsOf(v, 'timeout');
      const created = await ctx.client().runs.create({
        task: ctx.args[0]!,
        agent,
        ...(str(v, 'model') ? { model: str(v, 'model') } : {}),
        ...(str(v, 'session') ? { sessionId: str(v, 'session') } : {}),
        ...(str(v, 'workspace') ? { workspaceId: str(v, 'workspace') } : {}),
        ...(Object.keys(browser).length ? { browser } : {}),
        ...(files.length ? { files } : {}),
        ...(list(v, 'attach').length ? { attachedFileIds: list(v, 'attach') } : {}),
      });
      if (created.missingFileIds.length) ctx.err(`ats: warning: files not attached: ${created.missingFileIds.join(', ')}\n`);
      if (v.detach) {
        if (ctx.json) ctx.printJson(created);
        else ctx.out(`${created.id}\n`);
        return EXIT.ok;
      }
      return watchRun(ctx, created.id, created.agent, { follow: Boolean(v.follow), timeout });
    },
  },
  {
    path: ['runs', 'list'],
    summary: "List an agent's runs, newest first",
    options: {
      agent: agentOpt,
      session: { type: 'string', arg: '<id>', describe: 'Only the runs of this session' },
      status: { type: 'string', arg: '<status>', describe: 'Only runs in this status (queued, running, completed, stopped, failed)' },
      limit: { type: 'string', arg: '<n>', describe: 'At most this many (default 20)' },
    },
    async run(ctx) {
      const v = ctx.values;
      const limit = intOf(v, 'limit', 1, 100_000) ?? 20;
      const runs: Run[] = [];
      const status = str(v, 'status') as Run['status'] | undefined;
      for await (const r of ctx.client().runs.list({ agent: agentOf(v), ...(str(v, 'session') ? { sessionId: str(v, 'session') } : {}), ...(status ? { status } : {}), limit: Math.min(limit, 200) })) {
        runs.push(r);
        if (runs.length >= limit) break;
      }
      if (ctx.json) return ctx.printJson(runs), EXIT.ok;
      if (!runs.length) return ctx.err('No runs.\n'), EXIT.ok;
      ctx.out(table(['ID', 'STATUS', 'CREATED', 'TASK'], runs.map((r) => [r.id, ctx.style.status(r.status), when(r.createdAt), clip(r.task, 60)]), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['runs', 'get'],
    params: '<run-id>',
    summary: 'Show a run: status, answer, error, cost',
    arity: [1, 1],
    options: { agent: agentOpt },
    async run(ctx) {
      const r = await ctx.client().runs.get(ctx.args[0]!, { agent: agentOf(ctx.values) });
      if (ctx.json) return ctx.printJson(r), EXIT.ok;
      ctx.out(runFields(r, ctx.style));
      if (r.result !== null) ctx.out(`\n${r.result}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['runs', 'wait'],
    params: '<run-id>',
    summary: 'Wait for a run to end and print its answer',
    details: 'Exit code: 0 completed, 1 failed, 3 stopped, 4 --timeout passed.',
    arity: [1, 1],
    options: {
      agent: agentOpt,
      follow: { type: 'boolean', short: 'f', describe: 'Print each step or event as it happens' },
      timeout: { type: 'string', arg: '<seconds>', describe: 'Stop waiting after this long (exit 4)' },
    },
    async run(ctx) {
      return watchRun(ctx, ctx.args[0]!, agentOf(ctx.values), { follow: Boolean(ctx.values.follow), timeout: secondsOf(ctx.values, 'timeout') });
    },
  },
  {
    path: ['runs', 'stop'],
    params: '<run-id>',
    summary: 'Stop a queued or running run',
    arity: [1, 1],
    options: { agent: agentOpt },
    async run(ctx) {
      const r = await ctx.client().runs.stop(ctx.args[0]!, { agent: agentOf(ctx.values) });
      if (ctx.json) return ctx.printJson(r), EXIT.ok;
      ctx.out(`${r.id} ${ctx.style.status(r.status)}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['runs', 'steps'],
    params: '<run-id>',
    summary: "List a run's browser steps",
    arity: [1, 1],
    options: { agent: agentOpt, after: { type: 'string', arg: '<n>', describe: 'Only steps after this step number' } },
    async run(ctx) {
      const after = intOf(ctx.values, 'after', 0, 2 ** 31 - 1);
      const steps: Step[] = [];
      for await (const s of ctx.client().runs.steps(ctx.args[0]!, { agent: agentOf(ctx.values), ...(after !== undefined ? { after } : {}) })) steps.push(s);
      if (ctx.json) return ctx.printJson(steps), EXIT.ok;
      if (!steps.length) return ctx.err('No steps.\n'), EXIT.ok;
      ctx.out(table(['#', 'ACTION', 'URL', 'TIME'], steps.map((s) => [String(s.number), clip(s.action, 50), s.url ?? '-', duration(s.durationMs)]), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['runs', 'events'],
    params: '<run-id>',
    summary: "List a run's events",
    arity: [1, 1],
    options: { agent: agentOpt, after: { type: 'string', arg: '<id>', describe: 'Only events after this event id' } },
    async run(ctx) {
      const after = intOf(ctx.values, 'after', 0, Number.MAX_SAFE_INTEGER);
      const events: Event[] = [];
      for await (const e of ctx.client().runs.events(ctx.args[0]!, { agent: agentOf(ctx.values), ...(after !== undefined ? { after } : {}) })) events.push(e);
      if (ctx.json) return ctx.printJson(events), EXIT.ok;
      if (!events.length) return ctx.err('No events.\n'), EXIT.ok;
      ctx.out(table(['ID', 'TIME', 'TYPE', 'DATA'], events.map((e) => [String(e.id), when(e.ts), e.type, clip(JSON.stringify(e.data), 80)]), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['runs', 'files'],
    params: '<run-id>',
    summary: "List a run's files (input: attached; output: written by the agent)",
    details: 'Download them with `ats files download <run-id>`; --json includes each download URL.',
    arity: [1, 1],
    options: { agent: agentOpt, kind: { type: 'string', arg: '<kind>', describe: 'input or output (default both)' } },
    async run(ctx) {
      const kind = kindOf(ctx.values);
      const files = await ctx.client().runs.files(ctx.args[0]!, { agent: agentOf(ctx.values), ...(kind ? { kind } : {}) });
      if (ctx.json) return ctx.printJson(files.map((f) => ({ ...f }))), EXIT.ok;
      if (!files.length) return ctx.err('No files.\n'), EXIT.ok;
      ctx.out(table(['NAME', 'KIND', 'SIZE', 'ID'], files.map((f) => [f.name, f.kind, bytes(f.sizeBytes), f.id]), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'create'],
    summary: 'Start a browser to drive over CDP (prints its CDP and live view URLs)',
    options: {
      profile: { type: 'string', arg: '<id>', describe: 'Start with this profile (saved again when it stops)' },
      'proxy-country': { type: 'string', arg: '<cc>', describe: 'Browse through a proxy of this country' },
      width: { type: 'string', arg: '<px>', describe: 'Screen width (with --height)' },
      height: { type: 'string', arg: '<px>', describe: 'Screen height (with --width)' },
      'timeout-minutes': { type: 'string', arg: '<m>', describe: 'Stop it after this many minutes (default 60)' },
    },
    async run(ctx) {
      const v = ctx.values;
      const width = intOf(v, 'width', 1, 100_000);
      const height = intOf(v, 'height', 1, 100_000);
      const minutes = intOf(v, 'timeout-minutes', 1, 100_000);
      const b = await ctx.client().browsers.create({
        ...(str(v, 'profile') ? { profileId: str(v, 'profile') } : {}),
        ...(str(v, 'proxy-country') ? { proxyCountryCode: str(v, 'proxy-country') } : {}),
        ...(width !== undefined ? { screenWidth: width } : {}),
        ...(height !== undefined ? { screenHeight: height } : {}),
        ...(minutes !== undefined ? { timeoutMinutes: minutes } : {}),
      });
      if (ctx.json) return ctx.printJson(plain(b)), EXIT.ok;
      ctx.out(browserFields(b, ctx.style));
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'list'],
    summary: 'List browsers',
    options: {
      status: { type: 'string', arg: '<status>', describe: 'active or stopped' },
      session: { type: 'string', arg: '<id>', describe: 'Only the browser of this session' },
    },
    async run(ctx) {
      const v = ctx.values;
      const status = str(v, 'status') as Browser['status'] | undefined;
      const items: Browser[] = [];
      for await (const b of ctx.client().browsers.list({ ...(status ? { status } : {}), ...(str(v, 'session') ? { sessionId: str(v, 'session') } : {}) })) items.push(b);
      if (ctx.json) return ctx.printJson(items.map(plain)), EXIT.ok;
      if (!items.length) return ctx.err('No browsers.\n'), EXIT.ok;
      ctx.out(table(['ID', 'STATUS', 'CREATED', 'SIZE', 'PROFILE', 'RUN'], items.map((b) => [b.id, ctx.style.status(b.status), when(b.createdAt), `${b.screenWidth}x${b.screenHeight}`, b.profileId ?? '-', b.runId ?? '-']), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'get'],
    params: '<browser-id>',
    summary: 'Show a browser (with its recording URL once stopped)',
    arity: [1, 1],
    async run(ctx) {
      const b = await ctx.client().browsers.get(ctx.args[0]!);
      if (ctx.json) return ctx.printJson(plain(b)), EXIT.ok;
      ctx.out(browserFields(b, ctx.style));
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'stop'],
    params: '<browser-id>',
    summary: 'Stop a browser (a profile is saved; the recording is finished)',
    arity: [1, 1],
    async run(ctx) {
      const b = await ctx.client().browsers.stop(ctx.args[0]!);
      if (ctx.json) return ctx.printJson(plain(b)), EXIT.ok;
      ctx.out(`${b.id} ${ctx.style.status(b.status)}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'live-view'],
    params: '<browser-id>',
    summary: "Make a link to a browser's live view page",
    arity: [1, 1],
    options: {
      mode: { type: 'string', arg: '<mode>', describe: 'interactive (default) or view (read-only)' },
      'expires-in': { type: 'string', arg: '<seconds>', describe: 'How long the link works' },
    },
    async run(ctx) {
      const mode = str(ctx.values, 'mode');
      if (mode !== undefined && mode !== 'view' && mode !== 'interactive') throw new UsageError('--mode must be view or interactive');
      const expires = intOf(ctx.values, 'expires-in', 1, 10_000_000);
      const link = await ctx.client().browsers.liveViewLink(ctx.args[0]!, { mode: (mode as 'view' | 'interactive' | undefined) ?? 'interactive', ...(expires !== undefined ? { expiresInSeconds: expires } : {}) });
      if (ctx.json) return ctx.printJson(link), EXIT.ok;
      ctx.out(`${link.url}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['browsers', 'recording'],
    params: '<browser-id>',
    summary: "A stopped browser's MP4 recording: its URL, or the file with --out",
    arity: [1, 1],
    options: { out: { type: 'string', short: 'o', arg: '<path>', describe: 'Download it to this file or folder' } },
    async run(ctx) {
      const c = ctx.client();
      const rec = await c.browsers.recording(ctx.args[0]!);
      const out = str(ctx.values, 'out');
      if (out) {
        const written = await c.files.download(rec.url, { to: fs.existsSync(out) && fs.statSync(out).isDirectory() ? path.join(out, `${ctx.args[0]}.mp4`) : out });
        if (ctx.json) return ctx.printJson({ ...rec, path: written }), EXIT.ok;
        ctx.out(`${written}\n`);
        return EXIT.ok;
      }
      if (ctx.json) return ctx.printJson(rec), EXIT.ok;
      ctx.out(`${rec.url}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['files', 'upload'],
    params: '<path>...',
    summary: 'Upload files; prints the ids to pass as attached files',
    arity: [1, 20],
    options: { agent: agentOpt },
    async run(ctx) {
      for (const f of ctx.args) if (!fs.existsSync(f)) throw new UsageError(`${f}: no such file`);
      const uploaded = [];
      for (const f of ctx.args) uploaded.push(await ctx.client().files.upload(f, { agent: agentOf(ctx.values) }));
      if (ctx.json) return ctx.printJson(uploaded), EXIT.ok;
      ctx.out(table(['ID', 'NAME'], uploaded.map((u) => [u.id, u.name]), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['files', 'download'],
    params: '<run-id | url>',
    summary: "Download a run's files (or one download URL)",
    details: [
      "Given a run id, downloads the run's files into --out (a folder, default the current one);",
      'given a download URL (from --json output), downloads that file to --out (a file or folder).',
    ].join('\n'),
    arity: [1, 1],
    options: {
      agent: agentOpt,
      kind: { type: 'string', arg: '<kind>', describe: 'input or output (default both)' },
      name: { type: 'string', multiple: true, arg: '<name>', describe: 'Only the file of this name (repeatable)' },
      out: { type: 'string', short: 'o', arg: '<path>', describe: 'Where to write (default: the current folder)' },
    },
    async run(ctx) {
      const c = ctx.client();
      const target = ctx.args[0]!;
      const out = str(ctx.values, 'out') ?? '.';
      if (/^https?:\/\//.test(target)) {
        const written = await c.files.download(target, { to: out });
        if (ctx.json) return ctx.printJson([{ path: written }]), EXIT.ok;
        ctx.out(`${written}\n`);
        return EXIT.ok;
      }
      const kind = kindOf(ctx.values);
      const names = list(ctx.values, 'name');
      let files = await c.runs.files(target, { agent: agentOf(ctx.values), ...(kind ? { kind } : {}) });
      if (names.length) {
        const missing = names.filter((n) => !files.some((f) => f.name === n));
        if (missing.length) throw new UsageError(`run ${target} has no file named ${missing.join(', ')}`);
        files = files.filter((f) => names.includes(f.name));
      }
      if (!files.length) {
        if (ctx.json) return ctx.printJson([]), EXIT.ok;
        return ctx.err('No files.\n'), EXIT.ok;
      }
      fs.mkdirSync(out, { recursive: true });
      const written: { id: string; name: string; kind: string; path: string }[] = [];
      for (const f of files) {
        // A name may hold folders (extracts/…): the file goes to the same place under --out.
        const dest = path.join(out, f.name);
        const inside = path.relative(path.resolve(out), path.resolve(dest));
        if (inside.startsWith('..') || path.isAbsolute(inside)) throw new UsageError(`refusing to write ${f.name} outside ${out}`);
        fs.mkdirSync(path.dirname(dest), { recursive: true });
        written.push({ id: f.id, name: f.name, kind: f.kind, path: await f.download({ to: dest }) });
      }
      if (ctx.json) return ctx.printJson(written), EXIT.ok;
      for (const w of written) ctx.out(`${w.path}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['profiles', 'create'],
    params: '<name>',
    summary: 'Create a browser profile (keeps cookies and storage across browsers)',
    arity: [1, 1],
    options: { 'user-id': { type: 'string', arg: '<id>', describe: 'Your own id for whose profile it is' } },
    async run(ctx) {
      const p = await ctx.client().profiles.create({ name: ctx.args[0]!, ...(str(ctx.values, 'user-id') ? { userId: str(ctx.values, 'user-id') } : {}) });
      if (ctx.json) return ctx.printJson(p), EXIT.ok;
      ctx.out(`${p.id}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['profiles', 'list'],
    summary: 'List browser profiles',
    async run(ctx) {
      const items: Profile[] = [];
      for await (const p of ctx.client().profiles.list()) items.push(p);
      if (ctx.json) return ctx.printJson(items), EXIT.ok;
      if (!items.length) return ctx.err('No profiles.\n'), EXIT.ok;
      ctx.out(table(['ID', 'NAME', 'USER', 'LAST USED', 'COOKIE DOMAINS'], items.map((p) => [p.id, p.name, p.userId ?? '-', when(p.lastUsedAt), p.cookieDomains.join(',') || '-']), ctx.style, ctx.width));
      return EXIT.ok;
    },
  },
  {
    path: ['profiles', 'get'],
    params: '<profile-id>',
    summary: 'Show a browser profile',
    arity: [1, 1],
    async run(ctx) {
      const p = await ctx.client().profiles.get(ctx.args[0]!);
      if (ctx.json) return ctx.printJson(p), EXIT.ok;
      ctx.out(fields([['id', p.id], ['name', p.name], ['user', p.userId], ['last used', when(p.lastUsedAt)], ['cookie domains', p.cookieDomains.join(', ')], ['created', when(p.createdAt)]], ctx.style));
      return EXIT.ok;
    },
  },
  {
    path: ['profiles', 'rename'],
    params: '<profile-id> <name>',
    summary: 'Rename a browser profile',
    arity: [2, 2],
    async run(ctx) {
      const p = await ctx.client().profiles.update(ctx.args[0]!, { name: ctx.args[1]! });
      if (ctx.json) return ctx.printJson(p), EXIT.ok;
      ctx.out(`${p.id} ${p.name}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['profiles', 'delete'],
    params: '<profile-id>',
    summary: 'Delete a browser profile',
    arity: [1, 1],
    async run(ctx) {
      await ctx.client().profiles.delete(ctx.args[0]!);
      if (ctx.json) return ctx.printJson({ id: ctx.args[0], deleted: true }), EXIT.ok;
      ctx.out(`${ctx.args[0]} deleted\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['agents'],
    summary: 'List the agents and what each is for',
    async run(ctx) {
      const agents: Agent[] = await ctx.client().agents.list();
      if (ctx.json) return ctx.printJson(agents), EXIT.ok;
      for (const a of agents) {
        ctx.out(`${ctx.style.bold(a.name)}  ${ctx.style.dim(`${a.capabilities.join(', ')} · ${a.session.kind} sessions · watch ${a.watch}`)}\n`);
        ctx.out(`  best for: ${a.bestFor.join(' ')}\n`);
        if (a.exampleTasks[0]) ctx.out(`  e.g.     ats run ${JSON.stringify(a.exampleTasks[0])}${a.name === 'browser-agent' ? '' : ` --agent ${a.name}`}\n`);
      }
      return EXIT.ok;
    },
  },
  {
    path: ['models'],
    summary: 'List the models a run may name (--model) and the default',
    async run(ctx) {
      const offered = await ctx.client().models.list();
      if (ctx.json) return ctx.printJson(offered), EXIT.ok;
      for (const m of offered.models) {
        ctx.out(`${ctx.style.bold(m.name)}  ${ctx.style.dim(`${m.provider}${m.vision ? ' · reads images' : ''}${m.default ? ' · default' : ''}`)}\n`);
      }
      if (offered.otherNames) ctx.out(`also: ${offered.otherNames}\n`);
      return EXIT.ok;
    },
  },
  {
    path: ['mcp'],
    summary: 'Serve the MCP server over stdio (for Claude Desktop, Cursor, …)',
    details: 'Its tools act with the API key and base URL given here (or in the environment). It writes nothing but the protocol to stdout.',
    async run(ctx) {
      const { serveStdio } = await import('./mcp.js');
      await serveStdio(ctx.client());
      return EXIT.ok;
    },
  },
];

function kindOf(v: Values): 'input' | 'output' | undefined {
  const k = str(v, 'kind');
  if (k !== undefined && k !== 'input' && k !== 'output') throw new UsageError('--kind must be input or output');
  return k;
}

/** An SDK object's own data (a handle's methods are not data). */
function plain<T extends object>(o: T): T {
  return JSON.parse(JSON.stringify(o)) as T;
}

function runFields(r: Run, style: Style): string {
  return fields(
    [
      ['id', r.id],
      ['agent', r.agent],
      ['status', style.status(r.status)],
      ['task', clip(r.task, 200)],
      ['model', r.model],
      ['session', r.sessionId],
      ['browser', r.browserId],
      ['workspace', r.workspaceId],
      ['created', when(r.createdAt)],
      ['started', when(r.startedAt)],
      ['finished', when(r.finishedAt)],
      ['cost', `$${r.totalCostUsd} (${r.totalInputTokens} in, ${r.totalOutputTokens} out tokens)`],
      ...(r.error !== null ? ([['error', style.red(r.error)]] as [string, string][]) : []),
    ],
    style,
  );
}

function browserFields(b: Browser, style: Style): string {
  return fields(
    [
      ['id', b.id],
      ['status', style.status(b.status)],
      ['cdp url', b.cdpUrl],
      ['live view', b.liveViewUrl],
      ['profile', b.profileId],
      ['screen', `${b.screenWidth}x${b.screenHeight}`],
      ['created', when(b.createdAt)],
      ['times out', when(b.timeoutAt)],
      ['stopped', `${when(b.stoppedAt)}${b.stopReason ? ` (${b.stopReason.replace(/_/g, ' ')})` : ''}`],
      ['recording', b.recordingUrl],
    ],
    style,
  );
}

// ---------- watching a run ----------

const TERMINAL = new Set(['run.completed', 'run.failed', 'run.stopped']);

/**
 * Follows a run's events (server-sent, resumed after a dropped connection) until it ends, then
 * prints its answer. The spinner (a terminal only) counts steps; `follow` prints a line per event.
 */
async function watchRun(ctx: Ctx, runId: string, agent: AgentName, opts: { follow: boolean; timeout?: number }): Promise<number> {
  const client = ctx.client();
  const { style } = ctx;
  const spinner = new Spinner(ctx.io.stderr, style);
  const show = !ctx.json && spinner.enabled;
  const started = Date.now();
  // browser-agent counts its browser steps; browsercode every action (commands, files, browser steps).
  const counted = agent === 'browsercode' ? 'tool.call' : 'step';
  const unit = agent === 'browsercode' ? 'action' : 'step';
  let steps = 0;
  let status = 'queued';
  const count = () => `${steps} ${unit}${steps === 1 ? '' : 's'}`;
  const label = () => `${status} · ${count()} · ${Math.floor((Date.now() - started) / 1000)}s · ${runId}`;
  const line = (text: string) => spinner.above(() => ctx.out(`${text}\n`));
  const terminal = new TerminalText(line, style);
  // The label is read at each redraw: the elapsed time moves even while no event comes.
  if (show) spinner.set(label);
  if (opts.follow && !ctx.json) line(`${style.bold(runId)} ${style.dim(`(${agent})`)}`);

  const abort = new AbortController();
  let why: 'timeout' | 'interrupted' | undefined;
  const timer = opts.timeout !== undefined ? setTimeout(() => ((why = 'timeout'), abort.abort()), opts.timeout * 1000) : undefined;
  void (ctx.io.interrupted ?? sigint)().then(() => {
    why ??= 'interrupted';
    abort.abort();
  });
  try {
    try {
      for await (const ev of client.runs.stream(runId, { agent, signal: abort.signal })) {
        if (ev.type === counted) steps = Math.max(steps, Number((ev.data as { number?: number }).number ?? 0));
        if (ev.type === 'run.started') status = 'running';
        if (opts.follow) {
          if (ctx.json) ctx.out(`${JSON.stringify(ev)}\n`);
          else terminal.event(ev);
        }
        if (TERMINAL.has(ev.type)) break;
      }
    } catch (err) {
      if (!why) throw err;
    }
    terminal.flush();
    spinner.stop();
    if (why) {
      const flag = agent === 'browser-agent' ? '' : ` --agent ${agent}`;
      const hint = `the run goes on: \`ats runs wait ${runId}${flag}\`, or stop it with \`ats runs stop ${runId}${flag}\``;
      ctx.err(`ats: ${why === 'timeout' ? `--timeout ${opts.timeout}s passed` : 'interrupted'}; ${hint}\n`);
      if (ctx.json) ctx.printJson(await client.runs.get(runId, { agent }));
      return why === 'timeout' ? EXIT.timeout : EXIT.interrupted;
    }
    const run = await client.runs.get(runId, { agent });
    const took = run.startedAt && run.finishedAt ? ` in ${duration(Date.parse(run.finishedAt) - Date.parse(run.startedAt))}` : '';
    // With --follow the events were JSON lines: the run is one more line.
    if (ctx.json) opts.follow ? ctx.out(`${JSON.stringify(run)}\n`) : ctx.printJson(run);
    else {
      const mark = run.status === 'completed' ? style.green('✓') : run.status === 'failed' ? style.red('✗') : style.yellow('■');
      if (opts.follow) line(`${mark} ${style.status(run.status)}${took} · ${count()}`);
      else if (show) ctx.err(`${mark} ${runId} ${style.status(run.status)}${took} · ${count()}\n`);
      if (run.result !== null) ctx.out(`${run.result}\n`);
      if (run.status === 'failed') ctx.err(`ats: run ${run.id} failed: ${run.error ?? 'no reason given'}\n`);
      if (run.status === 'stopped') ctx.err(`ats: run ${run.id} was stopped\n`);
    }
    return run.status === 'completed' ? EXIT.ok : run.status === 'stopped' ? EXIT.stopped : run.status === 'failed' ? EXIT.failed : EXIT.error;
  } finally {
    clearTimeout(timer);
    spinner.stop();
  }
}

/** The next SIGINT (Ctrl-C), taken from the default handler while a run is watched. */
function sigint(): Promise<void> {
  return new Promise((resolve) => process.once('SIGINT', () => resolve()));
}

/** Event lines for a person: steps, tool calls, a command's output as it streams, files written. */
class TerminalText {
  readonly #line: (text: string) => void;
  readonly #style: Style;
  /** A command's output not yet ended by a newline, per stream. */
  readonly #partial = new Map<string, string>();

  constructor(line: (text: string) => void, style: Style) {
    this.#line = line;
    this.#style = style;
  }

  event(ev: Event): void {
    const s = this.#style;
    const d = ev.data as Record<string, unknown>;
    const text = (k: string) => (typeof d[k] === 'string' ? (d[k] as string) : '');
    if (ev.type === 'terminal.output') {
      const stream = text('stream') || 'stdout';
      const chunk = (this.#partial.get(stream) ?? '') + text('chunk');
      const lines = chunk.split('\n');
      this.#partial.set(stream, lines.pop()!);
      for (const l of lines) this.#line(`  ${s.dim('│')} ${stream === 'stderr' ? s.red(l) : l}`);
      return;
    }
    this.flush();
    switch (ev.type) {
      case 'run.queued':
        return this.#line(s.dim('queued'));
      case 'run.waiting':
      case 'browser.waiting':
        return this.#line(s.yellow(text('message') || 'waiting'));
      case 'run.started':
        return this.#line(s.dim(`started${text('model') ? ` · model ${text('model')}` : ''}`));
      case 'run.resumed':
        return this.#line(s.yellow(`resumed on another worker after step ${String(d.fromStep ?? 0)}${text('reason') ? ` (${text('reason')})` : ''}`));
      case 'browser.ready':
        return this.#line(s.dim(`browser ready${text('liveViewUrl') ? ` · live view ${text('liveViewUrl')}` : ''}`));
      case 'step': {
        const ms = typeof d.durationMs === 'number' ? `  ${s.dim(duration(d.durationMs))}` : '';
        // navigate's action already names its URL.
        const url = text('url') && !text('action').includes(text('url')) ? `  ${s.dim(clip(text('url'), 80))}` : '';
        return this.#line(`${s.cyan(`step ${String(d.number ?? '?')}`)}  ${text('action')}${url}${ms}`);
      }
      case 'tool.call':
        // A browser action is shown by its step; the answer (done) at the end.
        if (!CODE_TOOLS.has(text('tool'))) return;
        return this.#line(`${s.cyan('▸')} ${toolCall(text('tool'), d.input)}`);
      case 'tool.result':
        if (d.ok === false) this.#line(`  ${s.red('✗')} ${clip(text('error') || 'failed', 200)}`);
        return;
      case 'file.written':
        return this.#line(`${s.green('+')} ${text('path')}${typeof d.sizeBytes === 'number' ? s.dim(` (${bytes(d.sizeBytes)})`) : ''}`);
      case 'file.deleted':
        return this.#line(`${s.red('-')} ${text('path')}`);
      case 'file.skipped':
        return this.#line(`${s.yellow('!')} ${text('path')} not kept: ${text('reason')}`);
      case 'run.completed':
      case 'run.failed':
      case 'run.stopped':
        return;
      default:
        return this.#line(s.dim(`${ev.type} ${clip(JSON.stringify(d), 100)}`));
    }
  }

  /** Prints what is left of a command's output. */
  flush(): void {
    for (const [stream, rest] of this.#partial) if (rest) this.#line(`  ${this.#style.dim('│')} ${stream === 'stderr' ? this.#style.red(rest) : rest}`);
    this.#partial.clear();
  }
}

/** The browsercode tools that work on the disk and terminal (the others are browser actions, shown as steps). */
const CODE_TOOLS = new Set(['shell', 'write_file', 'read_file', 'list_files']);

function toolCall(tool: string, input: unknown): string {
  const i = (input ?? {}) as Record<string, unknown>;
  if (tool === 'shell' && typeof i.command === 'string') return `$ ${clip(i.command, 200)}`;
  if (tool === 'write_file' && typeof i.path === 'string') return `write ${i.path}${typeof i.sizeBytes === 'number' ? ` (${bytes(i.sizeBytes)})` : ''}`;
  if (tool === 'read_file' && typeof i.path === 'string') return `read ${i.path}`;
  if (tool === 'list_files') return 'list files';
  return `${tool} ${clip(JSON.stringify(i), 150)}`;
}

// ---------- parsing and help ----------

function findCommand(words: string[]): { command?: Command; group: string[] } {
  for (const c of COMMANDS) if (c.path.every((w, i) => words[i] === w)) return { command: c, group: c.path };
  const group = COMMANDS.some((c) => c.path[0] === words[0] && c.path.length > 1) ? [words[0]!] : [];
  return { group };
}

function optionLines(options: Record<string, Option>): string[] {
  const rows = Object.entries(options).map(([name, o]) => [`${o.short ? `-${o.short}, ` : '    '}--${name}${o.arg ? ` ${o.arg}` : ''}${o.multiple ? '...' : ''}`, o.describe]);
  const width = Math.max(...rows.map(([l]) => l!.length));
  return rows.map(([l, d]) => `  ${l!.padEnd(width)}  ${d}`);
}

function commandHelp(c: Command): string {
  const lines = [`Usage: ats ${c.path.join(' ')}${c.params ? ` ${c.params}` : ''}${c.options ? ' [options]' : ''}`, '', c.summary + '.'];
  if (c.details) lines.push('', c.details);
  if (c.options) lines.push('', 'Options:', ...optionLines(c.options));
  lines.push('', 'Global options:', ...optionLines(GLOBAL));
  return lines.join('\n') + '\n';
}

function groupHelp(group: string[]): string {
  const cmds = COMMANDS.filter((c) => group.every((w, i) => c.path[i] === w));
  const rows = cmds.map((c) => [`ats ${c.path.join(' ')}${c.params ? ` ${c.params}` : ''}`, c.summary]);
  const width = Math.max(...rows.map(([l]) => l!.length));
  const lines = group.length
    ? [`Usage: ats ${group.join(' ')} <command> [options]`, '', 'Commands:']
    : [
        'ats — the command line of the Agent Task Service',
        '',
        'Usage: ats <command> [options]     (ats <command> --help for its options)',
        '',
        'Commands:',
      ];
  lines.push(...rows.map(([l, d]) => `  ${l!.padEnd(width)}  ${d}`));
  lines.push('', 'Global options:', ...optionLines(GLOBAL));
  if (!group.length) {
    lines.push(
      '',
      'Environment: ATS_API_KEY (the project API key), ATS_BASE_URL (default http://localhost:8080).',
      'Exit codes: 0 done (a run completed), 1 the run failed, 3 the run was stopped,',
      '            4 --timeout passed, 2 usage or API error (the detail and request id on stderr), 130 Ctrl-C.',
    );
  }
  return lines.join('\n') + '\n';
}

function parse(argv: string[], options: Record<string, Option>) {
  const config: ParseArgsConfig['options'] = {};
  for (const [name, o] of Object.entries(options)) config[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
  try {
    return parseArgs({ args: argv, options: config, allowPositionals: true, strict: true });
  } catch (err) {
    // node's messages name the option; the rest of them is about its API, not ours.
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, '').replace(/^Unknown option '([^']+)'.*$/s, "unknown option '$1'"));
  }
}

/** Runs `ats` with `argv` (without node and the script); resolves to the exit code. */
export async function main(argv: string[], io?: Partial<CliIo>): Promise<number> {
  const streams: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env, ...io };
  const style = new Style(colorsFor(streams.stdout, streams.env));
  const errStyle = new Style(colorsFor(streams.stderr, streams.env));
  let apiKey: string | undefined;
  let command: Command | undefined;
  try {
    // The command is the leading words that are not options (global options may come first).
    const loose = parse(argv, { ...GLOBAL, ...Object.assign({}, ...COMMANDS.map((c) => c.options ?? {})) });
    const found = findCommand(loose.positionals);
    command = found.command;
    if (loose.values.version) return streams.stdout.write(`${VERSION}\n`), EXIT.ok;
    if (!command) {
      const words = loose.positionals;
      if (loose.values.help || words.length === 0 || (found.group.length && words.length === 1)) {
        (words.length === 0 && !loose.values.help ? streams.stderr : streams.stdout).write(groupHelp(found.group));
        return words.length === 0 && !loose.values.help ? EXIT.error : EXIT.ok;
      }
      throw new UsageError(`unknown command '${words.join(' ')}'`);
    }
    const parsed = parse(argv, { ...GLOBAL, ...command.options });
    const values = parsed.values as Values;
    if (values.help) return streams.stdout.write(commandHelp(command)), EXIT.ok;
    // The command's words are the first positionals; the rest are its arguments.
    const args = parsed.positionals.slice(command.path.length);
    const [min, max] = command.arity ?? [0, 0];
    if (args.length < min) throw new UsageError(`missing ${command.params ?? 'arguments'}`, command);
    if (args.length > max) throw new UsageError(`unexpected argument '${args[max]}'`, command);
    apiKey = str(values, 'api-key') ?? streams.env.ATS_API_KEY;
    const baseUrl = str(values, 'base-url') ?? streams.env.ATS_BASE_URL;
    let client: AgentTaskService | undefined;
    const json = Boolean(values.json);
    const ctx: Ctx = {
      io: streams,
      style: json ? new Style(false) : style,
      json,
      values,
      args,
      client() {
        if (!apiKey) throw new UsageError('no API key: set ATS_API_KEY or pass --api-key');
        client ??= new AgentTaskService({ apiKey, ...(baseUrl ? { baseUrl } : {}) });
        return client;
      },
      out: (text) => void streams.stdout.write(text),
      err: (text) => void streams.stderr.write(text),
      printJson: (value) => void streams.stdout.write(`${JSON.stringify(value, null, 2)}\n`),
      ...(streams.stdout.isTTY && streams.stdout.columns ? { width: streams.stdout.columns } : {}),
    };
    return await command.run(ctx);
  } catch (err) {
    const hide = (s: string) => (apiKey && apiKey.length >= 8 ? s.split(apiKey).join('***') : s);
    if (err instanceof UsageError) {
      const c = err.command ?? command;
      streams.stderr.write(`ats: ${hide(err.message)}\n${errStyle.dim(`Run 'ats ${c ? `${c.path.join(' ')} ` : ''}--help' for usage.`)}\n`);
      return EXIT.error;
    }
    // The API's errors (status, detail — each invalid field for a 422 — and request id), the
    // network's, a file that cannot be read or written.
    streams.stderr.write(`ats: ${hide(err instanceof Error ? err.message : String(err))}\n`);
    return EXIT.error;
  }
}
