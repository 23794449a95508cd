/** What the agent-loop tests and benches share: a headless Chromium, and one run of the browser-agent loop with what it recorded. */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'puppeteer-core';
import type { DownloadSource } from '../../services/run/src/agents/downloads.js';
import { runBrowserAgent, type BrowserAgentInput, type RecordedStep } from '../../services/run/src/agents/browser-agent.js';
import type { Usage } from '../../services/run/src/agents/model.js';
import { createModelRegistry, type ModelRegistry, type ModelsConfig } from '../../services/run/src/agents/models.js';
import { startFakeAnthropic, type FakeAnthropic } from './fake-anthropic.js';
import { startFakeOpenAI, type FakeOpenAI } from './fake-openai.js';
import { serveSite, type TestSite } from './site.js';
import { launchTestChromium } from './test-chromium.js';

export { launchTestChromium };

export type LoopOptions = Pick<BrowserAgentInput, 'browser' | 'model' | 'task'> & Partial<Pick<BrowserAgentInput, 'turns' | 'diskDir' | 'diskFiles' | 'maxSteps' | 'downloads'>> & { timeoutMs?: number };

/**
 * What the browser-pool does for a run's browser, on a test Chromium: downloads are saved into
 * `dir` (Browser.setDownloadBehavior) and listed from there, finished files only.
 */
export async function folderDownloads(browser: Browser, dir: string): Promise<DownloadSource> {
  await fs.mkdir(dir, { recursive: true });
  const session = await browser.target().createCDPSession();
  await session.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir, eventsEnabled: true });
  return {
    list: async () => {
      const names = (await fs.readdir(dir)).filter((n) => !n.endsWith('.crdownload')).sort();
      return Promise.all(names.map(async (name) => ({ name, sizeBytes: (await fs.stat(path.join(dir, name))).size })));
    },
    read: async (name, maxBytes) => {
      const bytes = await fs.readFile(path.join(dir, name));
      if (bytes.length > maxBytes) throw new Error(`${name} is larger than ${maxBytes} bytes`);
      return bytes;
    },
  };
}

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
    downloads: o.downloads,
    maxSteps: o.maxSteps ?? 50,
    deadline: Date.now() + (o.timeoutMs ?? 60000),
    actionTimeoutMs: 10000,
    signal: new AbortController().signal,
    recordStep: async (s) => void steps.push(s),
    recordUsage: async (u) => void usage.push(u),
  });
  return { result, usage, steps };
}

/** What a test of the loop against the fake providers needs: the fixture site, both fake providers, a Chromium, and models on them. */
export interface AgentHarness {
  site: TestSite;
  fake: FakeOpenAI;
  anthropic: FakeAnthropic;
  browser: Browser;
  models: ModelRegistry;
  /** Forgets the requests the fakes recorded (each test counts its own). */
  reset(): void;
  close(): Promise<void>;
}

/** Starts the harness; `models` names the models each fake serves and the registry's limits. */
export async function startAgentHarness(models: Pick<ModelsConfig, 'openaiModels' | 'anthropicModels' | 'visionModels' | 'timeoutMs'>): Promise<AgentHarness> {
  const site = await serveSite();
  const fake = await startFakeOpenAI();
  const anthropic = await startFakeAnthropic();
  const browser = await launchTestChromium();
  return {
    site,
    fake,
    anthropic,
    browser,
    models: createModelRegistry({ openaiBaseUrl: fake.baseUrl, anthropicApiKey: 'sk-ant-test-not-a-secret', anthropicBaseUrl: anthropic.baseUrl, prices: {}, maxRetries: 0, ...models }),
    reset() {
      fake.requests.length = 0;
      anthropic.requests.length = 0;
    },
    async close() {
      await browser.close();
      await fake.close();
      await anthropic.close();
      await site.close();
    },
  };
}
