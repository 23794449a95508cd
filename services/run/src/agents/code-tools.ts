/**
 * The browsercode tools that work on the run's disk and terminal: a shell command (its output
 * streamed as `terminal.output` events while it runs), and writing, reading and listing files.
 * Each returns what the model is told (output or error) and the extra fields of its
 * `tool.result` event; paths never leave the disk.
 */
import { constants as fsc } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { RunStopped } from './run-errors.js';
import { giveTo, insideDisk, listDisk, runShell, type Terminal } from './shell.js';

/** Largest file read_file returns to the model. */
const MAX_READ_BYTES = 256 * 1024;
/** terminal.output events are batched: at most one per this many ms per stream. */
const OUTPUT_FLUSH_MS = 100;

/** What a tool use gave: text for the model (and the builtin's answer), or a failure, and the extra fields of its tool.result event. */
export interface ToolOutcome {
  output?: string;
  error?: string;
  data?: Record<string, unknown>;
}

/** What the code tools work with. */
export interface CodeToolContext {
  /** The run's disk, materialised: the working directory of every command. */
  diskDir: string;
  terminal: Terminal;
  signal: AbortSignal;
  emit(type: string, data: Record<string, unknown>): Promise<void>;
}

/** Runs one bash command in the run's disk, streaming its output as events. */
export async function runShellTool(command: string, c: CodeToolContext): Promise<ToolOutcome> {
  const { limits, user, sandbox, caps, cgroups, scratchDir } = c.terminal;
  if (sandbox === 'unavailable') {
    return { error: 'Commands cannot run on this service: it cannot sandbox them on this host (unshare is refused). Use the file tools and the browser, or ask the operator (SHELL_SANDBOX)' };
  }
  await giveTo(c.diskDir, user);
  const pending: Record<'stdout' | 'stderr', string> = { stdout: '', stderr: '' };
  let flushing = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    for (const stream of ['stdout', 'stderr'] as const) {
      const chunk = pending[stream];
      if (!chunk) continue;
      pending[stream] = '';
      flushing = flushing.then(() => c.emit('terminal.output', { stream, chunk })).catch(() => undefined);
    }
  };
  const r = await runShell(command, {
    cwd: c.diskDir,
    signal: c.signal,
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
  if (c.signal.aborted) throw new RunStopped();
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

/** A system error's message with the disk's host folder taken out (paths read relative to the disk): a client never learns host paths. */
export function withoutHostPath(message: string, dir: string): string {
  const root = path.resolve(dir);
  return message.split(root + path.sep).join('').split(root).join('.');
}

/** Writes a text file on the disk (replacing it), never through a link a command left there. */
export async function writeDiskFile(dir: string, p: string, content: string): Promise<ToolOutcome> {
  let full: string;
  try {
    full = await insideDisk(dir, p);
    await fs.mkdir(path.dirname(full), { recursive: true });
    if ((await fs.lstat(full).catch(() => undefined))?.isDirectory()) return { error: `${p} is a directory` };
    await fs.rm(full, { force: true });
    await fs.writeFile(full, content, { flag: 'wx' });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'EEXIST') return { error: `Cannot write ${p}: a part of its path is a file` };
    return { error: withoutHostPath((err as Error).message, dir) };
  }
  const sizeBytes = Buffer.byteLength(content);
  const rel = path.relative(dir, full).split(path.sep).join('/');
  return { output: `Wrote ${rel} (${sizeBytes} bytes)`, data: { path: rel, sizeBytes } };
}

/** Reads a text file of the disk, saying so when it is cut. */
export async function readDiskFile(dir: string, p: string): Promise<ToolOutcome> {
  try {
    const full = await insideDisk(dir, p);
    // Non-blocking: a FIFO the command made must not hang a thread of the service.
    const handle = await fs.open(full, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOFOLLOW);
    try {
      const st = await handle.stat();
      if (st.isDirectory()) return { error: `${p} is a directory` };
      if (!st.isFile()) return { error: `${p} is not a regular file` };
      const { size } = st;
      const buf = Buffer.alloc(Math.min(size, MAX_READ_BYTES));
      await handle.read(buf, 0, buf.length, 0);
      const text = buf.toString('utf8');
      if (size <= MAX_READ_BYTES) return { output: text };
      return { output: `(file cut: ${p} is ${size} bytes and only its first ${MAX_READ_BYTES} follow; read the rest with a command such as \`tail -c +${MAX_READ_BYTES + 1} ${p}\`)\n${text}`, data: { truncated: true, sizeBytes: size } };
    } finally {
      await handle.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { error: code === 'ENOENT' ? `There is no file ${JSON.stringify(p)} on the run's disk` : code === 'ELOOP' ? `"${p}" is a link, not a file` : withoutHostPath((err as Error).message, dir) };
  }
}

/** The disk's files with their sizes. */
export async function listDiskFiles(dir: string): Promise<ToolOutcome> {
  const files = await listDisk(dir);
  return { output: files.length ? files.map((f) => `${f.path} (${f.sizeBytes} bytes)`).join('\n') : '(no files)' };
}
