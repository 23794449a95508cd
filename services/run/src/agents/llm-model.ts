/**
 * An LLM behind the AI SDK (OpenAI-compatible endpoints, Anthropic) deciding one browser action
 * per step through tool calling. Each call carries the task, earlier turns, the steps so far and
 * the page state. Provider failures become clear run errors; a call never outlives its timeout.
 */
import { APICallError, generateText, jsonSchema, tool, type LanguageModel } from 'ai';
import type { Action } from './actions.js';
import { ModelError, type AgentModel, type DecideInput, type Decision, type StepMemory, type Usage } from './model.js';
import type { PageQuestion } from './page-extract.js';
import { askModel } from './page-question.js';
import type { Observation } from './page-tools.js';

const SYSTEM = `You operate a web browser to complete the user's task. Each turn you see the current page: its URL, title, tabs, the interactive elements as "[index] <tag> text", and the visible text. Call exactly one tool per turn. Refer to elements by their [index]. When the task is complete, or cannot be completed, call "done" with the answer for the user (plain text; if the task asks for JSON, the JSON text).`;
const SYSTEM_CODE = `You complete the user's task with a Linux terminal, files and a web browser. The working directory is the run's disk: files you write there are returned to the user as output files, and files the user attached are there too. "shell" runs one bash command there and returns its output and exit code (no network credentials, limited time and output). Use write_file/read_file/list_files for files. The browser opens when you first use a browser tool (start with navigate); each turn then shows the current page: its URL, title, tabs, the interactive elements as "[index] <tag> text", and the visible text. Call exactly one tool per turn. Larger results belong in files. When the task is complete, or cannot be completed, call "done" with the answer for the user.`;

const obj = (properties: Record<string, unknown>, required: string[] = []) => jsonSchema<any>({ type: 'object', properties, required, additionalProperties: false });
const index = { type: 'integer', description: 'The [index] of the element' };

/** The tools, one per action; their inputs are validated by the SDK against these schemas. */
const TOOLS = {
  navigate: tool({ description: 'Open a URL in the current tab', inputSchema: obj({ url: { type: 'string' } }, ['url']) }),
  click: tool({ description: 'Click an element', inputSchema: obj({ index }, ['index']) }),
  type: tool({ description: 'Replace the text of a field; submit=true presses Enter after', inputSchema: obj({ index, text: { type: 'string' }, submit: { type: 'boolean' } }, ['index', 'text']) }),
  select: tool({ description: 'Choose an option of a <select> by its text', inputSchema: obj({ index, option: { type: 'string' } }, ['index', 'option']) }),
  press: tool({ description: 'Press a key (Enter, Tab, Escape, ArrowDown, …)', inputSchema: obj({ key: { type: 'string' } }, ['key']) }),
  scroll: tool({ description: 'Scroll the page', inputSchema: obj({ direction: { type: 'string', enum: ['down', 'up', 'bottom', 'top'] } }, ['direction']) }),
  go_back: tool({ description: 'Go back in history', inputSchema: obj({}) }),
  wait: tool({ description: 'Wait for a text to appear, or a number of seconds (max 10)', inputSchema: obj({ text: { type: 'string' }, seconds: { type: 'number' } }) }),
  extract: tool({
    description:
      'Read the page. With "question" (and optionally a JSON "schema" for the answer), the whole page is read as markdown, in parts if long, and the question answered from it. Without, "what" reads exactly: title, heading, url, links (JSON), table (JSON rows; "table" picks one by 1-based number or caption/heading), text or markdown, of the element [index] or CSS selector, or the whole page. Long results are saved to a file on the run\'s disk and the result says where',
    inputSchema: obj({
      question: { type: 'string' },
      schema: { type: 'object', description: 'JSON schema of the answer' },
      what: { type: 'string', enum: ['title', 'heading', 'text', 'links', 'table', 'url', 'markdown'] },
      index,
      selector: { type: 'string' },
      table: { type: ['integer', 'string'], description: 'Which table: 1-based number or caption/heading text' },
    }),
  }),
  find_text: tool({ description: 'Find a text on the page: says whether and where it occurs (with the heading above), and scrolls to it', inputSchema: obj({ text: { type: 'string' } }, ['text']) }),
  switch_tab: tool({ description: 'Switch to a tab by its number (0-based)', inputSchema: obj({ tab: { type: 'integer' } }, ['tab']) }),
  upload: tool({ description: "Put a file from the run's disk into a file input", inputSchema: obj({ index, path: { type: 'string' } }, ['index', 'path']) }),
  done: tool({ description: 'Finish with the answer for the user', inputSchema: obj({ result: { type: 'string' } }, ['result']) }),
};

/** browsercode's tools: the browser's plus a terminal and files. */
const CODE_TOOLS = {
  ...TOOLS,
  shell: tool({ description: "Run one bash command in the run's disk directory; returns its output and exit code", inputSchema: obj({ command: { type: 'string' } }, ['command']) }),
  write_file: tool({ description: "Write a text file on the run's disk (relative path; replaces it)", inputSchema: obj({ path: { type: 'string' }, content: { type: 'string' } }, ['path', 'content']) }),
  read_file: tool({ description: "Read a text file of the run's disk", inputSchema: obj({ path: { type: 'string' } }, ['path']) }),
  list_files: tool({ description: "List the files of the run's disk with their sizes", inputSchema: obj({}) }),
};

/** The tool call the model made → an action (code tools only for browsercode). */
export function toAction(name: string, input: Record<string, any>, toolset: 'browser' | 'code' = 'browser'): Action {
  switch (name) {
    case 'shell':
    case 'write_file':
    case 'read_file':
    case 'list_files': {
      if (toolset !== 'code') throw new ModelError(`The model called an unknown tool "${name}"`);
      const text = (field: string) => {
        if (typeof input[field] !== 'string') throw new ModelError(`The model called "${name}" without a text "${field}"`);
        return input[field] as string;
      };
      if (name === 'shell') return { name, command: text('command') };
      if (name === 'write_file') return { name, path: text('path'), content: text('content') };
      if (name === 'read_file') return { name, path: text('path') };
      return { name };
    }
    case 'go_back':
      return { name: 'back' };
    case 'navigate':
    case 'click':
    case 'type':
    case 'select':
    case 'press':
    case 'scroll':
    case 'wait':
    case 'extract':
    case 'find_text':
    case 'switch_tab':
    case 'upload':
    case 'done':
      return { ...input, name } as Action;
    default:
      throw new ModelError(`The model called an unknown tool "${name}"`);
  }
}

/** The page as the model reads it. */
export function describePage(o: Observation | undefined): string {
  if (!o) return '(no browser is open yet; a browser tool such as navigate opens one)';
  const els = o.elements
    .map((e) => {
      const words = [e.text, e.label && `label="${e.label}"`, e.placeholder && `placeholder="${e.placeholder}"`, e.name && `name="${e.name}"`, e.href && `href="${e.href}"`, e.options && `options=${JSON.stringify(e.options)}`].filter(Boolean).join(' ');
      return `[${e.index}] <${e.tag}${e.type && e.tag === 'input' ? ` type=${e.type}` : ''}> ${words}`;
    })
    .join('\n');
  const tabs = o.tabs.map((t) => `${t.active ? '*' : ' '} tab ${t.tab}: ${t.title} — ${t.url}`).join('\n');
  return `URL: ${o.url}\nTitle: ${o.title}\nTabs:\n${tabs}\nInteractive elements:\n${els || '(none)'}\nVisible text:\n${o.text}`;
}

function describeHistory(h: StepMemory[]): string {
  if (!h.length) return '(no steps yet)';
  return h.map((s, i) => `${i + 1}. ${JSON.stringify(s.action).slice(0, 2000)}${s.extracted !== undefined ? ` → ${s.extracted.slice(0, 4000)}` : ''}${s.error ? ` → FAILED: ${s.error}` : ''}`).join('\n');
}

export interface LlmModelOptions {
  name: string;
  model: LanguageModel;
  timeoutMs: number;
  maxRetries: number;
}

export class LlmModel implements AgentModel {
  /** A question about the page, answered in its own call (extract with a question). */
  ask(question: PageQuestion, signal: AbortSignal): Promise<{ text: string; usage: Usage }> {
    return askModel(this.#o, question, signal);
  }

  readonly name: string;
  readonly #o: LlmModelOptions;

  constructor(options: LlmModelOptions) {
    this.name = options.name;
    this.#o = options;
  }

  async decide(input: DecideInput, signal: AbortSignal): Promise<Decision> {
    const turns = input.turns.map((t, i) => `Turn ${i + 1} task: ${t.task}\nTurn ${i + 1} answer: ${t.result ?? '(none)'}`).join('\n\n');
    const prompt = [
      turns && `Earlier in this conversation:\n${turns}`,
      `Task: ${input.task}`,
      input.diskFiles.length ? `Files on the run's disk: ${input.diskFiles.slice(0, 200).join(', ')}${input.diskFiles.length > 200 ? ` (and ${input.diskFiles.length - 200} more)` : ''}` : '',
      `Steps so far:\n${describeHistory(input.history)}`,
      `Current page:\n${describePage(input.observation)}`,
    ]
      .filter(Boolean)
      .join('\n\n');
    const timeout = AbortSignal.timeout(this.#o.timeoutMs);
    let result;
    try {
      result = await generateText({
        model: this.#o.model,
        system: input.toolset === 'code' ? SYSTEM_CODE : SYSTEM,
        prompt,
        tools: input.toolset === 'code' ? CODE_TOOLS : TOOLS,
        toolChoice: 'required',
        maxRetries: this.#o.maxRetries,
        abortSignal: AbortSignal.any([signal, timeout]),
      });
    } catch (err) {
      if (signal.aborted) throw err;
      if (timeout.aborted) throw new ModelError(`The model did not answer within ${Math.round(this.#o.timeoutMs / 1000)} s`, { cause: err });
      throw new ModelError(`The model provider failed: ${providerMessage(err)}`, { cause: err });
    }
    const usage = { inputTokens: result.usage.inputTokens ?? 0, outputTokens: result.usage.outputTokens ?? 0 };
    const call = result.toolCalls[0];
    if (!call) {
      // A model that answers in prose instead of calling a tool has given its answer.
      if (result.text.trim()) return { thought: 'answered without a tool', action: { name: 'done', result: result.text.trim() }, usage };
      throw new ModelError('The model answered with neither a tool call nor text');
    }
    if ((call as { invalid?: boolean }).invalid) throw new ModelError(`The model made a malformed tool call to "${call.toolName}": ${String((call as { error?: unknown }).error ?? '').slice(0, 300)}`);
    return { thought: result.text.trim() || `calls ${call.toolName}`, action: toAction(call.toolName, call.input as Record<string, any>, input.toolset), usage };
  }
}

/** What went wrong at the provider, without echoing request bodies or keys. */
function providerMessage(err: unknown): string {
  const e = (err as { lastError?: unknown }).lastError ?? err;
  if (APICallError.isInstance(e)) return `HTTP ${e.statusCode ?? '?'}${e.isRetryable ? ' (retried)' : ''}: ${(e.message ?? '').slice(0, 200)}`;
  return ((e as Error).message ?? String(e)).split('\n')[0]!.slice(0, 200);
}
