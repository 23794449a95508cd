// A standalone browser driven with Playwright over CDP; `await using` stops it at the end of the scope.
import { chromium } from 'playwright-core';
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService();

await using browser = await client.browsers.create({ screenWidth: 1280, screenHeight: 800 });

const pw = await chromium.connectOverCDP(browser.cdpUrl!);
const context = pw.contexts()[0] ?? (await pw.newContext());
const page = context.pages()[0] ?? (await context.newPage());
await page.goto(site);
console.log('title:', await page.title());
await pw.close();
