/**
 * What the `ats` command shows a person: colours, a spinner with a counter, tables and key/value
 * views. Colours and the spinner appear only on a terminal (and never with NO_COLOR for colours),
 * so piped output stays plain lines.
 */

/** The two streams the command writes to; a test or the MCP server never sees them. */
export interface Streams {
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
}

/** ANSI styles, or plain text when colours are off. */
export class Style {
  readonly on: boolean;
  constructor(on: boolean) {
    this.on = on;
  }
  #wrap(open: number, close: number, s: string): string {
    return this.on ? `\x1b[${open}m${s}\x1b[${close}m` : s;
  }
  bold = (s: string) => this.#wrap(1, 22, s);
  dim = (s: string) => this.#wrap(2, 22, s);
  red = (s: string) => this.#wrap(31, 39, s);
  green = (s: string) => this.#wrap(32, 39, s);
  yellow = (s: string) => this.#wrap(33, 39, s);
  cyan = (s: string) => this.#wrap(36, 39, s);

  /** A run or browser status, coloured by how it ended. */
  status(s: string): string {
    if (s === 'completed' || s === 'active' || s === 'open') return this.green(s);
    if (s === 'failed') return this.red(s);
    if (s === 'stopped' || s === 'closed') return this.yellow(s);
    return this.cyan(s);
  }
}

/** Colours on a terminal unless NO_COLOR is set (https://no-color.org) or FORCE_COLOR=0. */
export function colorsFor(stream: { isTTY?: boolean }, env: Record<string, string | undefined>): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR === '0') return false;
  return Boolean(stream.isTTY) && env.TERM !== 'dumb';
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * One status line at the bottom of a terminal, redrawn in place with a spinner, while other lines
 * scroll above it. On a stream that is not a terminal it draws nothing.
 */
export class Spinner {
  readonly #out: Streams['stderr'];
  readonly #style: Style;
  readonly #enabled: boolean;
  #text: () => string = () => '';
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;
  #drawn = false;

  constructor(out: Streams['stderr'], style: Style) {
    this.#out = out;
    this.#style = style;
    this.#enabled = Boolean(out.isTTY);
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  /** Starts (or updates) the line; a function is asked again at each redraw (a clock, a counter). */
  set(text: string | (() => string)): void {
    this.#text = typeof text === 'string' ? () => text : text;
    if (!this.#enabled) return;
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#draw(), 80);
      this.#timer.unref();
    }
    this.#draw();
  }

  /** Removes the line, prints `line` where it was (or nothing), and draws it again below. */
  above(write: () => void): void {
    this.#clear();
    write();
    if (this.#timer) this.#draw();
  }

  /** Removes the line for good. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#clear();
  }

  #draw(): void {
    const frame = this.#style.cyan(FRAMES[this.#frame++ % FRAMES.length]!);
    const width = Math.max(20, (this.#out.columns ?? 80) - 3);
    // A line longer than the terminal would wrap and could not be redrawn in place.
    this.#out.write(`\r\x1b[2K${frame} ${clip(this.#text(), width)}`);
    this.#drawn = true;
  }

  #clear(): void {
    if (!this.#drawn) return;
    this.#out.write('\r\x1b[2K');
    this.#drawn = false;
  }
}

/** `s` on one line, at most `max` characters (an ellipsis marks the cut). */
export function clip(s: string, max: number): string {
  const flat = s.replace(/\s*\n\s*/g, ' ');
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/** Seconds for a person: "850ms", "4.2s", "3m 05s". */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}

/** A byte count for a person. */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const ANSI = /\x1b\[[0-9;]*m/g;
const visible = (s: string) => s.replace(ANSI, '').length;

/**
 * Rows under a header, columns padded to their widest cell. The last column is not padded, and is
 * cut to fit `width` (a terminal's columns) so that no row wraps.
 */
export function table(header: string[], rows: string[][], style: Style, width?: number): string {
  const widths = header.map((h, i) => Math.max(visible(h), ...rows.map((r) => visible(r[i] ?? ''))));
  const lead = widths.slice(0, -1).reduce((a, w) => a + w + 2, 0);
  const fit = (c: string) => (width && visible(c) === c.length && lead + c.length > width ? clip(c, Math.max(10, width - lead)) : c);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? fit(c) : c + ' '.repeat(widths[i]! - visible(c))))
      .join('  ')
      .trimEnd();
  return [style.dim(line(header)), ...rows.map(line)].join('\n') + '\n';
}

/** `key: value` lines, keys aligned; null values show as "-". */
export function fields(entries: [string, string | number | boolean | null | undefined][], style: Style): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${style.dim(`${k}:`.padEnd(width + 1))} ${v === null || v === undefined || v === '' ? '-' : String(v)}`).join('\n') + '\n';
}

/** A timestamp as local "YYYY-MM-DD HH:MM:SS" (the API's ISO strings are UTC). */
export function when(iso: string | null | undefined): string {
  if (!iso) return '-';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
