/**
 * The browsercode loop: decide → act until the model is done or a limit is hit, with a terminal
 * (`shell`), the run's disk (`write_file`, `read_file`, `list_files`) and a browser that is
 * opened only when the model first needs one. Every tool use is a `tool.call` / `tool.result`
 * event pair; a command's output streams as `terminal.output` events while it runs; after each
 * command or write the disk is synced, so new files are output files (`file.written`) at once;
 * browser actions are also steps (with screenshots).
 */
import { constants as fsc } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { isCodeAction, type Action, type CodeAction } from './actions.js';
import { check, recordBrowserStep, RunStopped, waitForText, type RecordedStep } from './browser-agent.js';
import { ElementNotFound, ModelError, NeedsBrowser, turnResult, type AgentModel, type Decision, type StepMemory, type Usage } from './model.js';
import { pageAsker } from './page-question.js';
import { ActionError, act, activePage, observe, type Observation } from './page-tools.js';
import { giveTo, insideDisk, listDisk, runShell, type Terminal } from './shell.js';

/** Largest file read_file returns to the model, and largest tool output kept in an event. */
const MAX_READ_BYTES = 256 * 1024;
const MAX_EVENT_TEXT = 16 * 1024;
/** terminal.output events are batched: at most one per this many ms per stream. */
const OUTPUT_FLUSH_MS = 100;

export interface BrowsercodeInput {
  model: AgentModel;
  task: string;
  turns: { task: string; result: string | null }[];
  /** The run's disk, materialised: the working directory of every command. */
  diskDir: string;
  maxSteps: number;
  deadline: number;
  actionTimeoutMs: number;
  terminal: Terminal;
  signal: AbortSignal;
  /** Provisions the run's browser and connects to it (called at most once, when first needed). */
  openBrowser(): Promise<Browser>;
  emit(type: string, data: Record<string, unknown>): Promise<void>;
  /** Stores what changed on the disk as the run's output files (emitting file.written); returns why files were not stored. */
  syncOutputs(): Promise<string[]>;
  recordStep(step: RecordedStep): Promise<void>;
  recordUsage(usage: Usage): Promise<void>;
}

const clip = (s: string, n = MAX_EVENT_TEXT) => (s.length > n ? `${s.slice(0, n)}… (${s.length - n} more characters)` : s);

/** What a tool use gave: text for the model (and the builtin's answer), or a failure. */
interface ToolOutcome {
  output?: string;
  error?: string;
  /** Extra fields of the tool.result event. */
  data?: Record<string, unknown>;
}

export async function runBrowsercode(input: BrowsercodeInput): Promise<string> {
  const { model } = input;
  const history: StepMemory[] = [];
  let browser: Browser | undefined;
  let page: Page | undefined;
  let browserSteps = 0;

  const ensureBrowser = async (): Promise<Page> => {
    if (!browser) {
      browser = await input.openBrowser();
      page = await activePage(browser);
    }
    return page!;
  };

  const listFiles = async () => (await listDisk(input.diskDir)).map((f) => f.path);
  let diskFiles = await listFiles(); // listed again only after a tool that changes the disk

  for (let n = 1; ; n++) {
    check(input, n);
    const started = Date.now();
    let observation: Observation | undefined = browser && page ? await observe(browser, page) : undefined;
    const decideInput = () => ({ task: input.task, toolset: 'code' as const, turns: input.turns, observation, history, diskFiles });
    let decision: Decision;
    try {
      decision = await model.decide(decideInput(), input.signal);
    } catch (err) {
      if (!(err instanceof NeedsBrowser) && !(err instanceof ElementNotFound)) throw err;
      // The model must see a page first (or the page was still rendering): open or look again.
      const p = await ensureBrowser();
      if (err instanceof ElementNotFound) await waitForText(p, err.target, Math.min(3000, input.actionTimeoutMs));
      observation = await observe(browser!, p);
      decision = await model.decide(decideInput(), input.signal).catch((again: unknown) => {
        throw again instanceof ElementNotFound || again instanceof NeedsBrowser ? new ModelError(again.message) : again;
      });
    }
    if (decision.usage) await input.recordUsage(decision.usage);
    const action: Action = decision.action;
    if (action.name === 'done') return turnResult(action.result, history);
    check(input, n);

    const memory: StepMemory = { thought: decision.thought, action };
    await input.emit('tool.call', { number: n, tool: action.name, input: toolInput(action), thought: decision.thought });
    let outcome: ToolOutcome;
    if (isCodeAction(action)) {
      outcome = await runCodeAction(input, action);
      if (action.name === 'shell' || action.name === 'write_file') {
        diskFiles = await listFiles();
        const notStored = await input.syncOutputs();
        // The model must know a file it made is not an output (too large), or it would point the user at it.
        if (notStored.length) outcome = { ...outcome, ...(outcome.error === undefined ? { output: [outcome.output, ...notStored].filter(Boolean).join('\n') } : { error: [outcome.error, ...notStored].join('\n') }) };
      }
    } else {
      const p = await ensureBrowser();
      const actionStarted = Date.now();
      try {
        const r = await act(browser!, p, action, { diskDir: input.diskDir, timeoutMs: input.actionTimeoutMs, signal: input.signal, ask: pageAsker(model, input.signal, input.recordUsage) });
        page = r.page;
        outcome = r.extracted !== undefined ? { output: r.extracted } : {};
      } catch (err) {
        if (input.signal.aborted) throw new RunStopped();
        if (!(err instanceof ActionError)) throw err;
        outcome = { error: err.message };
      }
      await recordBrowserStep(input.recordStep, page!, { number: ++browserSteps, action, thought: decision.thought, started, actionMs: Date.now() - actionStarted });
      outcome.data = { url: page!.url() };
    }
    if (input.signal.aborted) throw new RunStopped();
    await input.emit('tool.result', {
      number: n,
      tool: action.name,
      ok: outcome.error === undefined,
      ...(outcome.output !== undefined ? { output: clip(outcome.output) } : {}),
      ...(outcome.error !== undefined ? { error: outcome.error } : {}),
      ...outcome.data,
    });
    if (outcome.error !== undefined) {
      // The builtin interpreter is deterministic: a failed instruction ends the run. An LLM may try something else.
      if (model.name === 'builtin') throw new ActionError(outcome.error);
      memory.error = outcome.error;
    }
    if (outcome.output !== undefined) memory.extracted = outcome.output;
    history.push(memory);
  }
}

/** The tool's input as the tool.call event shows it (file contents clipped). */
function toolInput(a: Action): Record<string, unknown> {
  const { name: _name, ...rest } = a as Action & Record<string, unknown>;
  if (a.name === 'write_file') return { path: a.path, sizeBytes: Buffer.byteLength(a.content), content: clip(a.content, 4096) };
  return rest;
}

async function runCodeAction(input: BrowsercodeInput, a: CodeAction): Promise<ToolOutcome> {
  const dir = input.diskDir;
  switch (a.name) {
    case 'shell': {
      const { limits, user, sandbox, caps, cgroups, scratchDir } = input.terminal;
      if (sandbox === 'unavailable') {
        return { error: 'Commands cannot run on this service: it cannot sandbox them on this host (unshare is refused). Use the file tools and the browser, or ask the operator (SHELL_SANDBOX)' };
      }
      await giveTo(dir, user);
      const pending: Record<'stdout' | 'stderr', string> = { stdout: '', stderr: '' };
      let flushing = Promise.resolve();
      let timer: NodeJS.Timeout | undefined;
      const flush = () => {
        timer = undefined;
        for (const stream of ['stdout', 'stderr'] as const) {
          const chunk = pending[stream];
          if (!chunk) continue;
          pending[stream] = '';
          flushing = flushing.then(() => input.emit('terminal.output', { stream, chunk })).catch(() => undefined);
        }
      };
      const r = await runShell(a.command, {
        cwd: dir,
        signal: input.signal,
        ...limits,
        user,
        sandbox,
        caps,
        cgroups,
        scratchDir,
        onOutput: (stream, chunk) => {
          pending[stream] += chunk;
          timer ??= setTimeout(flush, OUTPUT_FLUSH_MS);
        },
      });
      if (timer) clearTimeout(timer);
      flush();
      await flushing;
      if (input.signal.aborted) throw new RunStopped();
      const data = { exitCode: r.exitCode, timedOut: r.timedOut, truncated: r.truncated, durationMs: r.durationMs, ...(r.diskExceeded !== undefined ? { diskQuotaExceeded: true } : {}) };
      const cut = r.truncated ? ` (output cut at ${limits.maxOutputBytes} bytes; redirect it to a file to keep all of it)` : '';
      const tail = r.output.length > 2000 ? `(last 2000 of ${r.output.length} characters${cut}) …${r.output.slice(-2000)}` : r.output + cut;
      if (r.diskExceeded !== undefined && caps) {
        const mib = (b: number) => (b / (1024 * 1024)).toFixed(1);
        return { error: `The command was stopped: disk quota of ${caps.maxDiskMb} MiB exceeded (the run's disk held ${mib(r.diskExceeded)} MiB); delete files to make room${tail ? `; its output ended with: ${tail.trim()}` : ''}`, data };
      }
      if (r.timedOut) return { error: `The command was stopped after ${Math.round(limits.timeoutMs / 1000)} s (time limit)${tail ? `; its output ended with: ${tail}` : ''}`, data };
      if (r.exitCode !== 0) return { error: `The command exited with code ${r.exitCode ?? r.signal}${tail ? `: ${tail.trim()}` : ''}`, data };
      // The notice comes first, so a reader that keeps only the beginning still learns the output was cut.
      return { output: (r.truncated ? `(output cut at ${limits.maxOutputBytes} bytes: only its first ${limits.maxOutputBytes} bytes follow; redirect it to a file to keep all of it)\n` : '') + r.output.trim(), data };
    }
    case 'write_file': {
      let full: string;
      try {
        full = await insideDisk(dir, a.path);
        await fs.mkdir(path.dirname(full), { recursive: true });
        if ((await fs.lstat(full).catch(() => undefined))?.isDirectory()) return { error: `${a.path} is a directory` };
        await fs.rm(full, { force: true }); // never write through a link the command left there
        await fs.writeFile(full, a.content, { flag: 'wx' });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOTDIR' || code === 'EEXIST') return { error: `Cannot write ${a.path}: a part of its path is a file` };
        return { error: (err as Error).message.replace(dir + path.sep, '') };
      }
      const sizeBytes = Buffer.byteLength(a.content);
      const rel = path.relative(dir, full).split(path.sep).join('/');
      return { output: `Wrote ${rel} (${sizeBytes} bytes)`, data: { path: rel, sizeBytes } };
    }
    case 'read_file': {
      try {
        const full = await insideDisk(dir, a.path);
        // Non-blocking: a FIFO the command made must not hang a thread of the service.
        const handle = await fs.open(full, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOFOLLOW);
        try {
          const st = await handle.stat();
          if (st.isDirectory()) return { error: `${a.path} is a directory` };
          if (!st.isFile()) return { error: `${a.path} is not a regular file` };
          const { size } = st;
          const buf = Buffer.alloc(Math.min(size, MAX_READ_BYTES));
          await handle.read(buf, 0, buf.length, 0);
          const text = buf.toString('utf8');
          if (size <= MAX_READ_BYTES) return { output: text };
          return { output: `(file cut: ${a.path} is ${size} bytes and only its first ${MAX_READ_BYTES} follow; read the rest with a command such as \`tail -c +${MAX_READ_BYTES + 1} ${a.path}\`)\n${text}`, data: { truncated: true, sizeBytes: size } };
        } finally {
          await handle.close();
        }
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        return { error: code === 'ENOENT' ? `There is no file ${JSON.stringify(a.path)} on the run's disk` : code === 'ELOOP' ? `"${a.path}" is a link, not a file` : (err as Error).message };
      }
    }
    case 'list_files': {
      const files = await listDisk(dir);
      return { output: files.length ? files.map((f) => `${f.path} (${f.sizeBytes} bytes)`).join('\n') : '(no files)' };
    }
  }
}
