// A standalone browser driven with puppeteer over CDP; `await using` stops it at the end of the scope.
import puppeteer from 'puppeteer-core';
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService();

await using browser = await client.browsers.create();
console.log('watch it live:', browser.liveViewUrl);

const pptr = await puppeteer.connect({ browserWSEndpoint: browser.cdpUrl! });
const page = (await pptr.pages())[0] ?? (await pptr.newPage());
await page.goto(site);
console.log('title:', await page.title());
await pptr.disconnect();
