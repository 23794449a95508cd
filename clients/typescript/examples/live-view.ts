// Live view: the browser's own link (interactive) and a read-only link to share or embed in an <iframe>.
import puppeteer from 'puppeteer-core';
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService();

await using browser = await client.browsers.create();
console.log('interactive:', browser.liveViewUrl);

const link = await browser.liveViewLink({ mode: 'view', expiresInSeconds: 600 });
console.log('read-only until', link.expiresAt, link.url);

const pptr = await puppeteer.connect({ browserWSEndpoint: browser.cdpUrl! });
const page = (await pptr.pages())[0] ?? (await pptr.newPage());
await page.goto(site); // what the viewers now see
await pptr.disconnect();
