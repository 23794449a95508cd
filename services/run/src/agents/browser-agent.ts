/**
 * The browser-agent loop: observe → decide → act until the model is done or a limit is hit.
 * Every action is a step (with a screenshot); a reply's several actions run in order until one
 * changes the page. Failures of the builtin interpreter end the run (it is deterministic); an LLM
 * is told what went wrong (its own unusable replies, failed actions, dialogs, loops) and goes on.
 */
import type { Browser, Frame, Page } from 'puppeteer-core';
import { describeAction, type Action } from './actions.js';
import { DialogWatcher } from './dialogs.js';
import { LoopWatch } from './loop-watch.js';
import { ElementNotFound, ModelError, turnResult, type AgentModel, type Decision, type LoopState, type StepMemory, type Usage } from './model.js';
import { pageAsker } from './page-question.js';
import { ActionError, act, activePage, observe, type Observation } from './page-tools.js';
import { checkJson, wantsJson } from './structured-answer.js';

/** The run was stopped by its client. */
export class RunStopped extends Error {
  constructor() {
    super('Stopped');
    this.name = this.constructor.name;
  }
}

/** A limit (steps, duration, failed model replies) ended the run, maybe with a partial answer. */
export class LimitReached extends Error {
  /** The best answer the run had when it ended: stored as the run's result beside the error. */
  readonly partial: string | undefined;
  constructor(message: string, partial?: string) {
    super(message);
    this.name = this.constructor.name;
    this.partial = partial?.trim() ? partial : undefined;
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
  /** Unusable model replies in a row before the run ends (default 3). */
  maxModelFailures?: number;
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

/** Errors of a page that navigated under a script; looking again once it has loaded works. */
const NAVIGATION_RACE = /Execution context was destroyed|Cannot find context with specified id|Execution context is not available|Frame was detached|detached Frame|Navigating frame was detached/i;

/** Observes the page, looking again while a navigation (a redirect chain) replaces the document. */
export async function observeSettled(browser: Browser, page: Page, tries = 5): Promise<Observation> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await observe(browser, page);
    } catch (err) {
      if (attempt >= tries || !NAVIGATION_RACE.test((err as Error).message ?? '')) throw err;
      await page.waitForFunction(() => document.readyState === 'complete', { timeout: 2000 }).catch(() => undefined);
    }
  }
}

/** The element an action names, in a few words, from the observation the model acted on. */
function targetOf(action: Action, o: Observation): string | undefined {
  const index = (action as { index?: unknown }).index;
  if (typeof index !== 'number') return undefined;
  const e = o.elements.find((el) => el.index === index);
  if (!e) return undefined;
  const name = (e.text || e.label || e.placeholder || e.name || e.href || '').replace(/\s+/g, ' ').trim();
  return `${e.role || e.tag}${name ? ` "${name.length > 60 ? `${name.slice(0, 57)}...` : name}"` : ''}`;
}

/**
 * Runs the loop; resolves to the answer (`result`). An LLM's unusable replies and failed actions
 * are reported back to it; at the step limit or after too many unusable replies in a row it gets
 * one last call offering only `done`, and the run ends with LimitReached carrying that answer.
 */
export async function runBrowserAgent(input: BrowserAgentInput): Promise<string> {
  const { browser, model } = input;
  const llm = model.name !== 'builtin';
  const maxFailures = input.maxModelFailures ?? 3;
  const structured = llm && wantsJson(input.task);
  const dialogs = new DialogWatcher(browser);
  const ask = pageAsker(model, input.signal, input.recordUsage);
  const watch = new LoopWatch();
  const history: StepMemory[] = [];
  let page = await activePage(browser);
  let notes: string[] = [];
  let failures = 0;
  let steps = 0;
  /** An answer given in prose instead of through done: the fallback partial answer. */
  let prose: string | undefined;
  let jsonChecked = false;
  let observation: Observation | undefined;

  const decideInput = (loop: LoopState) => ({ task: input.task, toolset: 'browser' as const, turns: input.turns, observation, history, diskFiles: input.diskFiles, loop });
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

  try {
    dialogs.watch(page);
    for (;;) {
      if (input.signal.aborted) throw new RunStopped();
      if (Date.now() > input.deadline) throw new LimitReached('Time limit reached before the task was finished', partial());
      if (steps >= input.maxSteps) {
        if (!llm) throw new LimitReached(`Step limit reached: ${input.maxSteps} steps without finishing the task`, partial());
        await end(`Step limit reached: ${input.maxSteps} steps without finishing the task`, true);
      }
      const started = Date.now();
      observation = await observeSettled(browser, page);
      notes.push(...dialogs.take(), ...watch.look(observation));
      const loop: LoopState = { step: steps + 1, maxSteps: input.maxSteps, notes };
      let decision: Decision;
      try {
        try {
          decision = await model.decide(decideInput(loop), input.signal);
        } catch (err) {
          if (!(err instanceof ElementNotFound)) throw err;
          // The page may still be rendering: give the element a moment to appear, then look again.
          await waitForText(page, err.target, Math.min(3000, input.actionTimeoutMs));
          observation = await observeSettled(browser, page);
          decision = await model.decide(decideInput(loop), input.signal).catch((again: unknown) => {
            throw again instanceof ElementNotFound ? new ModelError(again.message) : again;
          });
        }
        if (decision.usage) await input.recordUsage(decision.usage);
        if (llm && decision.prose && decision.action.name === 'done') {
          prose = decision.action.result;
          throw new ModelError('The reply had no tool call (only text)');
        }
      } catch (err) {
        if (input.signal.aborted) throw new RunStopped();
        if (!llm || !(err instanceof ModelError)) throw err;
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
        steps++;
        const memory: StepMemory = { thought: decision.thought, action };
        if (i === 0 && decision.reasoning) memory.reasoning = decision.reasoning;
        const target = targetOf(action, observation);
        if (target) memory.target = target;
        const before = { page, url: page.url() };
        let navigated = 0;
        const onNavigated = (f: Frame) => void (f === before.page.mainFrame() && navigated++);
        before.page.on('framenavigated', onNavigated);
        const actionStarted = Date.now();
        try {
          const r = await act(browser, page, action, { diskDir: input.diskDir, timeoutMs: input.actionTimeoutMs, signal: input.signal, ask });
          page = r.page;
          dialogs.watch(page);
          if (r.extracted !== undefined) memory.extracted = r.extracted;
        } catch (err) {
          if (input.signal.aborted) throw new RunStopped();
          const race = NAVIGATION_RACE.test((err as Error).message ?? '');
          if (!llm || !(err instanceof ActionError || race)) throw err;
          memory.error = race ? `The page navigated while the action ran: ${(err as Error).message.split('\n')[0]}` : (err as Error).message;
        } finally {
          before.page.off('framenavigated', onNavigated);
        }
        const actionMs = Date.now() - actionStarted;
        memory.url = page.url();
        // Bounded: mid-navigation a title waits for the next document.
        memory.title = await Promise.race([page.title().catch(() => ''), new Promise<string>((r) => setTimeout(() => r(''), 2000).unref())]);
        const said = dialogs.take();
        const rest = actions.length - i - 1;
        const changed = page !== before.page || navigated > 0 || page.url() !== before.url;
        if (changed && rest > 0 && actions[i + 1]!.name !== 'done') said.push(`The page changed, so the ${rest} later action(s) of that reply were not run: ${actions.slice(i + 1).map(describeAction).join('; ')}`);
        if (said.length) memory.notes = said;
        history.push(memory);
        watch.acted(describeAction(action) + (target ? ` ${target}` : ''));
        await recordBrowserStep(input.recordStep, page, { number: steps, action, thought: i === 0 ? decision.thought : `(same reply) ${decision.thought}`, started: i === 0 ? started : actionStarted, actionMs });
        if (changed && rest > 0 && actions[i + 1]!.name !== 'done') break;
      }
    }
  } finally {
    dialogs.stop();
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
