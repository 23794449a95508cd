/**
 * The actions an agent can take, as models (and the builtin interpreter) name them: browser
 * actions for both agents; shell and file actions for browsercode only.
 */

export type ScrollDirection = 'down' | 'up' | 'bottom' | 'top';
export type ExtractWhat = 'title' | 'heading' | 'text' | 'links' | 'table' | 'url' | 'markdown';

export type Action =
  | { name: 'navigate'; url: string }
  | { name: 'click'; index: number }
  | { name: 'type'; index: number; text: string; submit?: boolean }
  | { name: 'select'; index: number; option: string }
  | { name: 'press'; key: string }
  | { name: 'scroll'; direction: ScrollDirection }
  | { name: 'back' }
  | { name: 'wait'; text?: string; seconds?: number }
  /**
   * Reads the page. Deterministic modes (`what`) may be narrowed to an element (`index`) or CSS
   * `selector`; `table` picks a table by its 1-based number or caption/heading. A `question`
   * (with an optional JSON `schema` for the answer) is answered by the model over the page as markdown.
   */
  | { name: 'extract'; what?: ExtractWhat; index?: number; selector?: string; table?: number | string; question?: string; schema?: Record<string, unknown> }
  /** Reports whether and where a text occurs on the page, and scrolls to its first occurrence. */
  | { name: 'find_text'; text: string }
  | { name: 'switch_tab'; tab: number }
  | { name: 'upload'; index: number; path: string }
  | { name: 'shell'; command: string }
  | { name: 'write_file'; path: string; content: string }
  | { name: 'read_file'; path: string }
  | { name: 'list_files' }
  | { name: 'done'; result: string };

/** Actions that work on the run's disk and terminal rather than in a browser. */
export type CodeAction = Extract<Action, { name: 'shell' | 'write_file' | 'read_file' | 'list_files' }>;

export function isCodeAction(a: Action): a is CodeAction {
  return a.name === 'shell' || a.name === 'write_file' || a.name === 'read_file' || a.name === 'list_files';
}

/** One line describing an action, as stored in a step's `action`. */
export function describeAction(a: Action): string {
  switch (a.name) {
    case 'navigate':
      return `navigate ${a.url}`;
    case 'click':
      return `click [${a.index}]`;
    case 'type':
      return `type ${JSON.stringify(a.text.length > 60 ? `${a.text.slice(0, 57)}...` : a.text)} into [${a.index}]${a.submit ? ' and submit' : ''}`;
    case 'select':
      return `select ${JSON.stringify(a.option)} in [${a.index}]`;
    case 'press':
      return `press ${a.key}`;
    case 'scroll':
      return `scroll ${a.direction}`;
    case 'back':
      return 'go back';
    case 'wait':
      return a.text !== undefined ? `wait for ${JSON.stringify(a.text)}` : `wait ${a.seconds ?? 1}s`;
    case 'extract':
      if (a.question !== undefined) return `extract ${JSON.stringify(a.question.length > 80 ? `${a.question.slice(0, 77)}...` : a.question)}`;
      return `extract ${a.what ?? 'text'}${a.table !== undefined ? ` ${JSON.stringify(a.table)}` : ''}${a.index !== undefined ? ` of [${a.index}]` : a.selector ? ` of ${a.selector}` : ''}`;
    case 'find_text':
      return `find ${JSON.stringify(a.text.length > 60 ? `${a.text.slice(0, 57)}...` : a.text)}`;
    case 'switch_tab':
      return `switch to tab ${a.tab}`;
    case 'upload':
      return `upload ${a.path} into [${a.index}]`;
    case 'shell':
      return `run ${a.command.length > 80 ? `${a.command.slice(0, 77)}...` : a.command}`;
    case 'write_file':
      return `write ${a.path}`;
    case 'read_file':
      return `read ${a.path}`;
    case 'list_files':
      return 'list files';
    case 'done':
      return 'done';
  }
}
