/**
 * browsercode: the agent loop (agent-loop.ts) with a terminal (`shell`), the run's disk
 * (`write_file`, `read_file`, `list_files`) and a browser opened only when the model first needs
 * one. Every tool use is a `tool.call` / `tool.result` event pair; a command's output streams as
 * `terminal.output` events while it runs; after each command or write the disk is synced, so new
 * files are output files (`file.written`) at once; browser actions are also steps (with screenshots).
 */
import type { Browser } from 'puppeteer-core';
import { runAgentLoop, type LoopInput } from './agent-loop.js';
import { listDisk, type Terminal } from './shell.js';

export interface BrowsercodeInput extends LoopInput {
  /** The run's disk, materialised: the working directory of every command. */
  diskDir: string;
  terminal: Terminal;
  /** Provisions the run's browser and connects to it (called at most once, when first needed). */
  openBrowser(): Promise<Browser>;
  emit(type: string, data: Record<string, unknown>): Promise<void>;
  /** Stores what changed on the disk as the run's output files (emitting file.written); returns why files were not stored. */
  syncOutputs(): Promise<string[]>;
}

/** Runs the browsercode loop; resolves to the answer (`result`). */
export function runBrowsercode(input: BrowsercodeInput): Promise<string> {
  return runAgentLoop(input, {
    toolset: 'code',
    openBrowser: input.openBrowser,
    listFiles: async () => (await listDisk(input.diskDir)).map((f) => f.path),
    code: { diskDir: input.diskDir, terminal: input.terminal, emit: input.emit, syncOutputs: input.syncOutputs },
  });
}
