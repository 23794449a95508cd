/** The browser-agent: the agent loop (agent-loop.ts) with a browser from the start and browser actions only. */
import type { Browser } from 'puppeteer-core';
import { runAgentLoop, type LoopInput } from './agent-loop.js';

export type { RecordedStep } from './agent-loop.js';

export interface BrowserAgentInput extends LoopInput {
  browser: Browser;
  /** Files on the run's disk, by path (for uploads). */
  diskFiles: string[];
}

/** Runs the browser-agent loop; resolves to the answer (`result`). */
export function runBrowserAgent(input: BrowserAgentInput): Promise<string> {
  return runAgentLoop(input, { toolset: 'browser', browser: input.browser, listFiles: async () => input.diskFiles });
}
