/**
 * The browser-agent loop: observe → decide → act until the model is done or a limit is hit.
 * Every action is a step (with a screenshot). Failures of the builtin interpreter end the run
 * (it is deterministic); an LLM is told what went wrong and may try something else.
 */
import type { Browser, Page } from 'puppeteer-core';
import { describeAction, type Action } from './actions.js';
import { ElementNotFound, ModelError, turnResult, type AgentModel, type StepMemory, type Usage } from './model.js';
import { pageAsker } from './page-question.js';
import { ActionError, act, activePage, observe } from './page-tools.js';

/** The run was stopped by its client. */
export class RunStopped extends Error {
  constructor() {
    super('Stopped');
    this.name = this.constructor.name;
  }
}

/** A limit (steps, duration) ended the run. */
export class LimitReached extends Error {
  constructor(message: string) {
    super(message);
    this.name = this.constructor.name;
  }
}

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
}

export interface BrowserAgentInput {
  browser: Browser;
  model: AgentModel;
  task: string;
  turns: { task: string; result: string | null }[];
  diskDir?: string | undefined;
  diskFiles: string[];
  maxSteps: number;
  deadline: number;
  actionTimeoutMs: number;
  signal: AbortSignal;
  recordStep(step: RecordedStep): Promise<void>;
  recordUsage(usage: Usage): Promise<void>;
}

/** Throws when the run was stopped or a limit is passed before step `steps`. */
export function check(input: { signal: AbortSignal; maxSteps: number; deadline: number }, steps: number): void {
  if (input.signal.aborted) throw new RunStopped();
  if (steps > input.maxSteps) throw new LimitReached(`Step limit reached: ${input.maxSteps} steps without finishing the task`);
  if (Date.now() > input.deadline) throw new LimitReached('Time limit reached before the task was finished');
}

/** Waits (at most `timeoutMs`, never failing) for `text` to show on the page. */
export async function waitForText(page: Page, text: string, timeoutMs: number): Promise<void> {
  await page
    .waitForFunction((t: string) => (document.body?.innerText ?? '').toLowerCase().includes(t.toLowerCase()), { timeout: timeoutMs }, text)
    .catch(() => undefined);
}

/** Runs the loop; resolves to the answer (`result`). */
export async function runBrowserAgent(input: BrowserAgentInput): Promise<string> {
  const { browser, model } = input;
  let page = await activePage(browser);
  const history: StepMemory[] = [];
  for (let n = 1; ; n++) {
    check(input, n);
    const started = Date.now();
    let observation = await observe(browser, page);
    const decideInput = () => ({ task: input.task, toolset: 'browser' as const, turns: input.turns, observation, history, diskFiles: input.diskFiles });
    let decision;
    try {
      decision = await model.decide(decideInput(), input.signal);
    } catch (err) {
      if (!(err instanceof ElementNotFound)) throw err;
      // The page may still be rendering: give the element a moment to appear, then look again.
      await waitForText(page, err.target, Math.min(3000, input.actionTimeoutMs));
      observation = await observe(browser, page);
      decision = await model.decide(decideInput(), input.signal).catch((again: unknown) => {
        throw again instanceof ElementNotFound ? new ModelError(again.message) : again;
      });
    }
    if (decision.usage) await input.recordUsage(decision.usage);
    const action: Action = decision.action;
    if (action.name === 'done') return turnResult(action.result, history);
    check(input, n);

    const actionStarted = Date.now();
    const memory: StepMemory = { thought: decision.thought, action };
    try {
      const r = await act(browser, page, action, { diskDir: input.diskDir, timeoutMs: input.actionTimeoutMs, signal: input.signal, ask: pageAsker(model, input.signal, input.recordUsage) });
      page = r.page;
      if (r.extracted !== undefined) memory.extracted = r.extracted;
    } catch (err) {
      if (input.signal.aborted) throw new RunStopped();
      if (!(err instanceof ActionError) || model.name === 'builtin') throw err;
      memory.error = err.message;
    }
    const actionMs = Date.now() - actionStarted;
    history.push(memory);
    await recordBrowserStep(input.recordStep, page, { number: n, action, thought: decision.thought, started, actionMs });
  }
}

/** Records a browser action as a step, with a screenshot of the page after it. */
export async function recordBrowserStep(
  record: (step: RecordedStep) => Promise<void>,
  page: Page,
  s: { number: number; action: Action; thought: string; started: number; actionMs: number },
): Promise<void> {
  const screenshot = await page.screenshot({ type: 'jpeg', quality: 60 }).catch(() => undefined);
  await record({
    number: s.number,
    url: page.url(),
    action: describeAction(s.action),
    thought: s.thought,
    screenshot: screenshot ? Buffer.from(screenshot) : undefined,
    startedAt: new Date(s.started),
    durationMs: Date.now() - s.started,
    actionMs: s.actionMs,
  });
}
