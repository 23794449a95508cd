/** What the agent-loop tests and benches share: a headless Chromium, and one run of the browser-agent loop with what it recorded. */
import puppeteer, { type Browser } from 'puppeteer-core';
import { runBrowserAgent, type BrowserAgentInput, type RecordedStep } from '../../services/run/src/agents/browser-agent.js';
import type { Usage } from '../../services/run/src/agents/model.js';

export const TEST_CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

export function launchTestChromium(): Promise<Browser> {
  return puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: TEST_CHROMIUM_ARGS });
}

export type LoopOptions = Pick<BrowserAgentInput, 'browser' | 'model' | 'task'> & Partial<Pick<BrowserAgentInput, 'turns' | 'diskDir' | 'diskFiles' | 'maxSteps'>> & { timeoutMs?: number };

/** Runs the loop to its answer (never stopped; 60 s unless `timeoutMs` says otherwise), collecting its steps and usage. */
export async function runLoop(o: LoopOptions): Promise<{ result: string; usage: Usage[]; steps: RecordedStep[] }> {
  const usage: Usage[] = [];
  const steps: RecordedStep[] = [];
  const result = await runBrowserAgent({
    browser: o.browser,
    model: o.model,
    task: o.task,
    turns: o.turns ?? [],
    diskDir: o.diskDir,
    diskFiles: o.diskFiles ?? [],
    maxSteps: o.maxSteps ?? 50,
    deadline: Date.now() + (o.timeoutMs ?? 60000),
    actionTimeoutMs: 10000,
    signal: new AbortController().signal,
    recordStep: async (s) => void steps.push(s),
    recordUsage: async (u) => void usage.push(u),
  });
  return { result, usage, steps };
}
