/** What an agent model sees and decides each step, whatever is behind it (an LLM or the builtin interpreter). */
import { describeAction, type Action } from './actions.js';
import type { DownloadedFile } from './downloads.js';
import type { PageQuestion } from './page-extract.js';
import type { Observation, PageElement } from './observe.js';

/** One earlier step of this run, as the model remembers it. */
export interface StepMemory {
  thought: string;
  action: Action;
  /** What an extraction returned. */
  extracted?: string;
  /** Why the action failed, when it did (the model may try something else). */
  error?: string;
  /** What the model said of its previous step, what it keeps in mind, and what it aims at next. */
  reasoning?: Reasoning;
  /** The element acted on, in a few words (`button "Place order"`). */
  target?: string;
  /** Where the action left the browser. */
  url?: string;
  title?: string;
  /** What else happened (a dialog answered, the rest of a reply's actions skipped). */
  notes?: string[];
}

/** The model's own account of a step, replayed to it in later steps. */
export interface Reasoning {
  evaluation?: string;
  memory?: string;
  nextGoal?: string;
}

/**
 * The answer of a turn: what the model answered or, when that is empty, what was extracted, else
 * what was done — a completed run always has a result.
 */
export function turnResult(answer: string | null | undefined, history: StepMemory[]): string {
  if (answer?.trim()) return answer;
  const extracted = history.map((h) => h.extracted).filter((e): e is string => !!e?.trim());
  if (extracted.length) return extracted.join('\n');
  if (!history.length) return 'Done: nothing needed doing';
  return `Done: ${history.map((h) => describeAction(h.action) + (h.error ? ` (failed: ${h.error.split('\n')[0]})` : '')).join('; ')}`;
}

/** What the model may use: a browser only (browser-agent), or also a terminal and files (browsercode). */
export type Toolset = 'browser' | 'code';

export interface DecideInput {
  task: string;
  toolset: Toolset;
  /** Earlier turns of the session (follow-ups see the conversation). */
  turns: { task: string; result: string | null }[];
  /** The page; undefined while browsercode has not opened a browser yet. */
  observation: Observation | undefined;
  history: StepMemory[];
  /** Files on the run's disk, by path (for uploads). */
  diskFiles: string[];
  /** Files the browser downloaded, oldest first (read_download reads them). */
  downloads?: DownloadedFile[];
  /** Where the run stands (the builtin ignores it). */
  loop?: LoopState;
}

/** What the loop tells the model beyond the page: the step count, what went wrong, whether only `done` is left. */
export interface LoopState {
  step: number;
  maxSteps: number;
  /** Messages for this call: a failed reply, a dialog, a nudge out of a loop. */
  notes: string[];
  /** The last call of the run: only `done` is offered. */
  finalCall?: boolean;
}

export interface Usage {
  /** All input tokens, cached ones included. */
  inputTokens: number;
  outputTokens: number;
  /** Input tokens the provider read from its prompt cache (priced apart), when it says. */
  cachedInputTokens?: number;
}

export interface Decision {
  thought: string;
  action: Action;
  /** More actions of the same reply, run in order after `action` while the page stays put. */
  then?: Action[];
  reasoning?: Reasoning;
  /** The model answered in prose rather than with a tool call (`action` is done with that text). */
  prose?: boolean;
  usage?: Usage;
}

export interface AgentModel {
  readonly name: string;
  decide(input: DecideInput, signal: AbortSignal): Promise<Decision>;
  /** Answers a question about (a part of) the page, for `extract` with a question; models without it extract deterministically. */
  ask?(question: PageQuestion, signal: AbortSignal): Promise<{ text: string; usage?: Usage }>;
  /** State the model keeps beyond the history (JSON), stored after each action so a run taken over goes on where it was. */
  snapshot?(): unknown;
  /** Takes back a snapshot (a run taken over from a dead worker). */
  restore?(state: unknown): void;
}

/**
 * The model could not follow the task (unparseable instruction, malformed tool call, provider
 * down, …). The builtin's end the run; an LLM's are reported back to it up to a limit.
 */
export class ModelError extends Error {
  /** Tokens the failed call used, when the provider answered. */
  readonly usage: Usage | undefined;
  /** `provider`: the call got no usable answer at all (HTTP error, timeout). */
  readonly kind: 'reply' | 'provider';
  /** Asking again cannot help (the provider refused the key, or does not know the model): the run ends at once. */
  readonly fatal: boolean;
  constructor(message: string, options?: { cause?: unknown; usage?: Usage; kind?: 'reply' | 'provider'; fatal?: boolean }) {
    super(message, options);
    this.name = this.constructor.name;
    this.usage = options?.usage;
    this.kind = options?.kind ?? 'reply';
    this.fatal = options?.fatal ?? false;
  }
}

/** The model needs to see a page before it can decide, and no browser is open yet. */
export class NeedsBrowser extends Error {
  constructor() {
    super('A browser is needed');
    this.name = this.constructor.name;
  }
}

/** An element the model named is not (yet) on the page. */
export class ElementNotFound extends Error {
  readonly target: string;
  constructor(target: string, url: string) {
    super(`No element matching ${JSON.stringify(target)} on ${url}`);
    this.name = this.constructor.name;
    this.target = target;
  }
}

export type { Observation, PageElement };
