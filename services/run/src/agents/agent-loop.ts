/**
 * The agent loop of both agents: observe → decide → act until the model is done or a limit is
 * hit. browser-agent has its browser from the start; browsercode opens one when the model first
 * needs it, and also has a terminal and the run's disk (each tool use a `tool.call` /
 * `tool.result` event pair). Every browser action is a step (with a screenshot); a reply's
 * several actions run in order until one changes the page. Failures of the builtin interpreter
 * end the run (it is deterministic); an LLM is told what went wrong (its own unusable replies,
 * failed actions, dialogs, loops) and goes on, up to a limit, then gets a last call for `done`.
 */
import type { Browser, Frame, Page } from 'puppeteer-core';
import { describeAction, isCodeAction, runBrowserAction, runCodeAction, type Action } from './actions.js';
import type { ToolOutcome } from './code-tools.js';
import { DialogWatcher } from './dialogs.js';
import { describeDownload, DOWNLOAD_SETTLE_MS, DownloadWatcher, RunDownloads, type DownloadedFile, type DownloadSource } from './downloads.js';
import { LoopWatch } from './loop-watch.js';
import { ElementNotFound, ModelError, NeedsBrowser, turnResult, type AgentModel, type Decision, type LoopState, type StepMemory, type Usage } from './model.js';
import { pageAsker } from './page-question.js';
import { observePage, type Observation } from './observe.js';
import { ActionError, activePage } from './page-tools.js';
import { LimitReached, RunStopped } from './run-errors.js';
import type { Terminal } from './shell.js';
import { checkJson, wantsJson } from './structured-answer.js';

export interface RecordedStep {
  number: number;
  url: string;
  action: string;
  thought: string;
  screenshot: Buffer | undefined;
  startedAt: Date;
  durationMs: number;
  /** Time spent in the browser action itself (for overhead measurement). */
  actionMs: number;
  /** Files the browser finished downloading during the step. */
  downloads?: DownloadedFile[];
  /** The loop after this step, stored with it: a run taken over goes on from there, never repeating it. */
  checkpoint?: LoopCheckpoint;
}

/** The loop after one action of the model: the action as it remembers it, and the counters. */
export interface LoopCheckpoint {
  /** Its place in the history (1-based). */
  seq: number;
  memory: StepMemory;
  state: { steps: number; browserSteps: number; model?: unknown };
}

/** Where a run taken over from a dead worker goes on: its history and counters, rebuilt from its checkpoints. */
export interface LoopResume {
  history: StepMemory[];
  /** Actions taken (max_steps counts them all). */
  steps: number;
  /** Browser steps recorded (the next one is numbered after them). */
  browserSteps: number;
  /** The model's own state (the builtin's place in the task). */
  model?: unknown;
  /** Told to the model at its first decision here (it was resumed; a command was cut short). */
  notes: string[];
}

/** What both agents' loops take. */
export interface LoopInput {
  model: AgentModel;
  task: string;
  turns: { task: string; result: string | null }[];
  diskDir?: string | undefined;
  maxSteps: number;
  /** Unusable model replies in a row before the run ends (default 3). */
  maxModelFailures?: number | undefined;
  deadline: number;
  actionTimeoutMs: number;
  signal: AbortSignal;
  recordStep(step: RecordedStep): Promise<void>;
  recordUsage(usage: Usage): Promise<void>;
  /** What the run's browser downloaded (the browser-pool's list); without it downloads go unseen. */
  downloads?: DownloadSource | undefined;
  /** Stores the loop's state after each action (a run taken over resumes from it). */
  saveCheckpoint?(c: LoopCheckpoint): Promise<void>;
  /** The run was taken over from a dead worker: it goes on from here. */
  resume?: LoopResume | undefined;
}

/** What the loop works with: a browser (open, or opened on first need) and, for browsercode, a terminal and the disk. */
export interface LoopTools {
  toolset: 'browser' | 'code';
  browser?: Browser;
  /** Provisions the run's browser and connects to it (called at most once, when first needed). */
  openBrowser?(): Promise<Browser>;
  /** The files on the run's disk (listed again after a tool that changes it). */
  listFiles(): Promise<string[]>;
  /** browsercode: its terminal and its events. */
  code?: {
    diskDir: string;
    terminal: Terminal;
    emit(type: string, data: Record<string, unknown>): Promise<void>;
    /** Stores what changed on the disk as the run's output files; returns why files were not stored. */
    syncOutputs(): Promise<string[]>;
  };
}

/** Waits (at most `timeoutMs`, never failing) for `text` to show on the page. */
export async function waitForText(page: Page, text: string, timeoutMs: number): Promise<void> {
  await page
    .waitForFunction((t: string) => (document.body?.innerText ?? '').toLowerCase().includes(t.toLowerCase()), { timeout: timeoutMs }, text)
    .catch(() => undefined);
}

/** Resolves at the page's next change (a node, an attribute or a text of its document), or after `timeoutMs`. */
export async function waitForChange(page: Page, timeoutMs: number): Promise<void> {
  await page
    .evaluate(
      (ms: number) =>
        new Promise<void>((resolve) => {
          const done = () => {
            observer.disconnect();
            clearTimeout(timer);
            resolve();
          };
          const observer = new MutationObserver(done);
          observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
          const timer = setTimeout(done, ms);
        }),
      Math.max(0, timeoutMs),
    )
    .catch(() => undefined);
}

/** Errors of a page that navigated under a script; looking again once it has loaded works. */
const NAVIGATION_RACE = /Execution context was destroyed|Cannot find context with specified id|Execution context is not available|Frame was detached|detached Frame|Navigating frame was detached/i;

/** Observes the page, looking again while a navigation (a redirect chain) replaces the document. */
export async function observeSettled(browser: Browser, page: Page, tries = 5): Promise<Observation> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await observePage(browser, page);
    } catch (err) {
      if (attempt >= tries || !NAVIGATION_RACE.test((err as Error).message ?? '')) throw err;
      await page.waitForFunction(() => document.readyState === 'complete', { timeout: 2000 }).catch(() => undefined);
    }
  }
}

/** The element an action names, in a few words, from the observation the model acted on. */
function targetOf(action: Action, o: Observation | undefined): string | undefined {
  const index = (action as { index?: unknown }).index;
  if (typeof index !== 'number' || !o) return undefined;
  const e = o.elements.find((el) => el.index === index);
  if (!e) return undefined;
  // A field is named by its label, not by what it held before the action (which typing replaces).
  const field = ['input', 'textarea', 'select'].includes(e.tag) || /^(textbox|searchbox|combobox|spinbutton)$/.test(e.role) || action.name === 'type' || action.name === 'select';
  const name = (field ? e.label || e.placeholder || e.name || e.id : e.text || e.label || e.placeholder || e.name || e.href || '').replace(/\s+/g, ' ').trim();
  return `${e.role || e.tag}${name ? ` "${name.length > 60 ? `${name.slice(0, 57)}...` : name}"` : ''}`;
}

const MAX_EVENT_TEXT = 16 * 1024;
const clip = (s: string, n = MAX_EVENT_TEXT) => (s.length > n ? `${s.slice(0, n)}… (${s.length - n} more characters)` : s);

/** The tool's input as the tool.call event shows it (file contents clipped). */
function toolInput(a: Action): Record<string, unknown> {
  const { name: _name, ...rest } = a as Action & Record<string, unknown>;
  if (a.name === 'write_file') return { path: a.path, sizeBytes: Buffer.byteLength(a.content), content: clip(a.content, 4096) };
  return rest;
}

/**
 * Runs the loop; resolves to the answer (`result`). An LLM's unusable replies and failed actions
 * are reported back to it; at the step limit or after too many unusable replies in a row it gets
 * one last call offering only `done`, and the run ends with LimitReached carrying that answer.
 */
export async function runAgentLoop(input: LoopInput, tools: LoopTools): Promise<string> {
  const { model } = input;
  const llm = model.name !== 'builtin';
  const maxFailures = input.maxModelFailures ?? 3;
  const structured = llm && wantsJson(input.task);
  const ask = pageAsker(model, input.signal, input.recordUsage);
  const watch = new LoopWatch();
  const resume = input.resume;
  const history: StepMemory[] = [...(resume?.history ?? [])];
  if (resume?.model !== undefined) model.restore?.(resume.model);
  let browser = tools.browser;
  let page: Page | undefined;
  let dialogs: DialogWatcher | undefined;
  let fetching: DownloadWatcher | undefined;
  const files = input.downloads ? new RunDownloads(input.downloads, input.diskDir) : undefined;
  /** Downloads finished when the run last asked the source. */
  let filesSeen = 0;
  let diskFiles = await tools.listFiles();
  let notes: string[] = [...(resume?.notes ?? [])];
  let failures = 0;
  let steps = resume?.steps ?? 0;
  let browserSteps = resume?.browserSteps ?? 0;
  const checkpoint = (memory: StepMemory, seq: number): LoopCheckpoint => ({ seq, memory, state: { steps, browserSteps, ...(model.snapshot ? { model: model.snapshot() } : {}) } });
  /** An answer given in prose instead of through done: the fallback partial answer. */
  let prose: string | undefined;
  let jsonChecked = false;
  let observation: Observation | undefined;

  /** The page to act on, opening the browser when the run has none yet. */
  const ensurePage = async (): Promise<Page> => {
    if (!browser) {
      if (!tools.openBrowser) throw new Error('This run has no browser');
      browser = await tools.openBrowser();
    }
    dialogs ??= new DialogWatcher(browser);
    if (files && !fetching) {
      fetching = new DownloadWatcher(browser);
      await files.start().catch(() => undefined); // without the list, earlier downloads are reported as they are next seen
    }
    if (!page) {
      page = await activePage(browser);
      dialogs.watch(page);
      fetching?.watch(page);
    }
    return page;
  };

  /** The downloads that finished since the last look, copied onto the disk (browsercode: stored as output files at once). */
  const arrivedFiles = async (): Promise<DownloadedFile[]> => {
    if (!files || !fetching || fetching.mark().finished === filesSeen) return [];
    const seen = fetching.mark().finished;
    // The browser-pool may be briefly unreachable: the files are asked for again at the next look.
    const fresh = await files.arrived().catch(() => undefined);
    if (!fresh) return [];
    filesSeen = seen;
    if (fresh.some((f) => f.diskPath)) {
      diskFiles = await tools.listFiles();
      await tools.code?.syncOutputs();
    }
    return fresh;
  };
  const arrivalNote = (f: DownloadedFile) =>
    `The browser downloaded ${describeDownload(f)}: read it with read_download${f.diskPath ? `; it is also on the run's disk as ${f.diskPath}` : ''}.`;
  const look = async () => (page && browser ? await observeSettled(browser, page) : undefined);

  const decideInput = (loop: LoopState) => ({ task: input.task, toolset: tools.toolset, turns: input.turns, observation, history, diskFiles, loop, ...(files ? { downloads: files.all() } : {}) });
  const partial = () => prose ?? (history.some((h) => h.extracted?.trim()) ? turnResult(null, history) : undefined);

  /** Ends the run at a limit, with the model's last word when it can still give one. */
  const end = async (reason: string, askModel: boolean): Promise<never> => {
    let answer: string | undefined;
    if (llm && askModel && !input.signal.aborted) {
      try {
        const d = await model.decide(decideInput({ step: steps, maxSteps: input.maxSteps, notes: [reason], finalCall: true }), input.signal);
        if (d.usage) await input.recordUsage(d.usage);
        if (d.action.name === 'done') answer = structured ? checkJson(d.action.result).text : d.action.result;
      } catch (err) {
        if (input.signal.aborted) throw new RunStopped();
        if (!(err instanceof ModelError)) throw err;
        if (err.usage) await input.recordUsage(err.usage);
      }
    }
    throw new LimitReached(reason, answer?.trim() ? answer : partial());
  };

  /** One action of a reply: runs it, records it, and says whether it changed the page. */
  const perform = async (action: Action, decision: Decision, first: boolean, started: number): Promise<{ memory: StepMemory; changed: boolean }> => {
    steps++;
    const memory: StepMemory = { thought: decision.thought, action };
    if (first && decision.reasoning) memory.reasoning = decision.reasoning;
    const target = targetOf(action, observation);
    if (target) memory.target = target;
    const thought = first ? decision.thought : `(same reply) ${decision.thought}`;
    await tools.code?.emit('tool.call', { number: steps, tool: action.name, input: toolInput(action), thought: decision.thought });
    let outcome: ToolOutcome;
    let changed = false;
    if (isCodeAction(action)) {
      const code = tools.code!;
      outcome = await runCodeAction(action, { diskDir: code.diskDir, terminal: code.terminal, signal: input.signal, emit: code.emit });
      if (action.name === 'shell' || action.name === 'write_file') {
        diskFiles = await tools.listFiles();
        const notStored = await code.syncOutputs();
        // The model must know a file it made is not an output (too large), or it would point the user at it.
        if (notStored.length) outcome = { ...outcome, ...(outcome.error === undefined ? { output: [outcome.output, ...notStored].filter(Boolean).join('\n') } : { error: [outcome.error, ...notStored].join('\n') }) };
      }
    } else {
      const before = await ensurePage();
      const url = before.url();
      let navigated = 0;
      const onNavigated = (f: Frame) => void (f === before.mainFrame() && navigated++);
      before.on('framenavigated', onNavigated);
      const actionStarted = Date.now();
      const downloadsBefore = fetching?.mark();
      try {
        const r = await runBrowserAction(action, { browser: browser!, page: before, diskDir: input.diskDir, timeoutMs: input.actionTimeoutMs, signal: input.signal, ask, downloads: files });
        page = r.page ?? before;
        dialogs!.watch(page);
        fetching?.watch(page);
        outcome = r.output !== undefined ? { output: r.output } : {}; // an LLM gets it fenced as page content in the history
        if (r.note !== undefined) memory.notes = [r.note];
      } catch (err) {
        if (input.signal.aborted) throw new RunStopped();
        const race = NAVIGATION_RACE.test((err as Error).message ?? '');
        if (!(err instanceof ActionError || (llm && race))) throw err;
        outcome = { error: race ? `The page navigated while the action ran: ${(err as Error).message.split('\n')[0]}` : (err as Error).message };
        // An address the browser answers with a file aborts the navigation: the file arriving is the outcome.
        if (/net::ERR_ABORTED/.test(outcome.error!) && fetching && (await fetching.begunSince(downloadsBefore!, 2000))) outcome = {};
      } finally {
        before.off('framenavigated', onNavigated);
      }
      // A download the action started is waited for (bounded), so the next look shows the file.
      if (fetching && fetching.mark().begun !== downloadsBefore!.begun) await fetching.settled(Math.min(DOWNLOAD_SETTLE_MS, input.actionTimeoutMs), input.signal);
      const downloaded = await arrivedFiles();
      if (downloaded.length) memory.notes = [...(memory.notes ?? []), ...downloaded.map(arrivalNote)];
      const actionMs = Date.now() - actionStarted;
      const p = page!;
      memory.url = p.url();
      // Bounded: mid-navigation a title waits for the next document.
      memory.title = await Promise.race([p.title().catch(() => ''), new Promise<string>((r) => setTimeout(() => r(''), 2000).unref())]);
      changed = p !== before || navigated > 0 || p.url() !== url;
      const number = ++browserSteps;
      const remembered: StepMemory = { ...memory, ...(outcome.error !== undefined ? { error: outcome.error } : {}), ...(outcome.output !== undefined ? { extracted: outcome.output } : {}) };
      await recordBrowserStep(input.recordStep, p, { number, action, thought, started: first ? started : actionStarted, actionMs, downloads: downloaded, checkpoint: checkpoint(remembered, history.length + 1) });
      outcome.data = { url: p.url() };
    }
    if (input.signal.aborted) throw new RunStopped();
    await tools.code?.emit('tool.result', {
      number: steps,
      tool: action.name,
      ok: outcome.error === undefined,
      ...(outcome.output !== undefined ? { output: clip(outcome.output) } : {}),
      ...(outcome.error !== undefined ? { error: outcome.error } : {}),
      ...outcome.data,
    });
    if (outcome.error !== undefined) {
      // The builtin interpreter is deterministic: a failed instruction ends the run. An LLM may try something else.
      if (!llm) throw new ActionError(outcome.error);
      memory.error = outcome.error;
    }
    if (outcome.output !== undefined) memory.extracted = outcome.output;
    watch.acted(describeAction(action) + (target ? ` ${target}` : ''));
    return { memory, changed };
  };

  try {
    if (browser) await ensurePage();
    for (;;) {
      if (input.signal.aborted) throw new RunStopped();
      if (Date.now() > input.deadline) throw new LimitReached('Time limit reached before the task was finished', partial());
      if (steps >= input.maxSteps) {
        if (!llm) throw new LimitReached(`Step limit reached: ${input.maxSteps} steps without finishing the task`, partial());
        await end(`Step limit reached: ${input.maxSteps} steps without finishing the task`, true);
      }
      const started = Date.now();
      observation = await look();
      if (observation) notes.push(...watch.look(observation));
      // Downloads that finished after the step that started them.
      notes.push(...(await arrivedFiles()).map(arrivalNote));
      notes.push(...(dialogs?.take() ?? []));
      const loop: LoopState = { step: steps + 1, maxSteps: input.maxSteps, notes };
      let decision: Decision;
      try {
        try {
          decision = await model.decide(decideInput(loop), input.signal);
        } catch (err) {
          if (!(err instanceof ElementNotFound || err instanceof NeedsBrowser)) throw err;
          // The model must see a page first, or the page may still be rendering: open it or give the element a moment, then look again,
          // at each change of the page until the moment is up (a feed becomes a scrollable panel once its first messages arrive).
          const p = await ensurePage();
          const deadline = Date.now() + Math.min(3000, input.actionTimeoutMs);
          if (err instanceof ElementNotFound) await waitForText(p, err.target, deadline - Date.now());
          for (;;) {
            observation = await look();
            try {
              decision = await model.decide(decideInput(loop), input.signal);
              break;
            } catch (again) {
              if (!(again instanceof ElementNotFound || again instanceof NeedsBrowser)) throw again;
              if (again instanceof NeedsBrowser || Date.now() >= deadline) throw new ModelError(again.message);
              await waitForChange(p, deadline - Date.now());
            }
          }
        }
        if (decision.usage) await input.recordUsage(decision.usage);
        if (llm && decision.prose && decision.action.name === 'done') {
          prose = decision.action.result;
          throw new ModelError('The reply had no tool call (only text)');
        }
      } catch (err) {
        if (input.signal.aborted) throw new RunStopped();
        if (!llm || !(err instanceof ModelError) || err.fatal) throw err;
        if (err.usage) await input.recordUsage(err.usage);
        failures++;
        if (failures >= maxFailures) {
          // A provider that is down will not answer a last call either.
          await end(`The model failed ${failures} times in a row; the last time: ${err.message}`, err.kind !== 'provider');
        }
        notes = [`Your previous reply could not be used: ${err.message}. Reply with one or more tool calls (to give your answer, call done).`];
        continue;
      }
      failures = 0;
      notes = [];

      const actions = [decision.action, ...(decision.then ?? [])];
      for (const [i, action] of actions.entries()) {
        if (action.name === 'done') {
          if (structured) {
            const { text, problem } = checkJson(action.result);
            if (problem && !jsonChecked) {
              jsonChecked = true;
              notes.push(`Your answer is not valid JSON (${problem}), and the task asks for JSON. Call done again with only the JSON text, no prose or code fence.`);
              break;
            }
            return turnResult(text, history);
          }
          return turnResult(action.result, history);
        }
        if (input.signal.aborted) throw new RunStopped();
        if (steps >= input.maxSteps) break;
        const { memory, changed } = await perform(action, decision, i === 0, started);
        const said = [...(memory.notes ?? []), ...(dialogs?.take() ?? [])];
        const rest = actions.slice(i + 1);
        // A failed action stops the reply (the rest was planned on its success, a done included); a page change stops the actions, as their indexes are stale.
        const failed = memory.error !== undefined;
        const skip = rest.length > 0 && (failed || (changed && rest[0]!.name !== 'done'));
        if (skip) {
          const notRun = `the ${rest.length} later action(s) of that reply were not run: ${rest.map(describeAction).join('; ')}`;
          said.push(failed ? `Action ${i + 1} of the ${actions.length} of that reply failed${i ? ` (the ${i} before it ran)` : ''}, so ${notRun}` : `The page changed, so ${notRun}`);
        }
        if (said.length) memory.notes = said;
        history.push(memory);
        await input.saveCheckpoint?.(checkpoint(memory, history.length));
        if (skip) break;
      }
    }
  } finally {
    dialogs?.stop();
    fetching?.stop();
  }
}

/** Records a browser action as a step, with a screenshot of the page after it. */
export async function recordBrowserStep(
  record: (step: RecordedStep) => Promise<void>,
  page: Page,
  s: { number: number; action: Action; thought: string; started: number; actionMs: number; downloads?: DownloadedFile[]; checkpoint?: LoopCheckpoint },
): Promise<void> {
  const screenshot = await page.screenshot({ type: 'jpeg', quality: 60 }).catch(() => undefined);
  const downloads = s.downloads ?? [];
  await record({
    number: s.number,
    url: page.url(),
    // The step says what arrived, so an API user sees the file beside the action that fetched it.
    action: describeAction(s.action) + (downloads.length ? ` → downloaded ${downloads.map(describeDownload).join(', ')}` : ''),
    thought: s.thought,
    screenshot: screenshot ? Buffer.from(screenshot) : undefined,
    startedAt: new Date(s.started),
    durationMs: Date.now() - s.started,
    actionMs: s.actionMs,
    ...(downloads.length ? { downloads } : {}),
    ...(s.checkpoint ? { checkpoint: s.checkpoint } : {}),
  });
}
