// A profile keeps cookies and local storage from one browser to the next (a login that lasts).
import puppeteer from 'puppeteer-core';
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService();
const profile = await client.profiles.create({ name: 'example-login' });

/** Opens the site in a new browser with the profile, runs `act` in the page, and stops the browser. */
async function withProfile<T>(act: () => T): Promise<T> {
  await using browser = await client.browsers.create({ profileId: profile.id });
  const pptr = await puppeteer.connect({ browserWSEndpoint: browser.cdpUrl! });
  const page = (await pptr.pages())[0] ?? (await pptr.newPage());
  await page.goto(site);
  const result = (await page.evaluate(act)) as T;
  await pptr.disconnect();
  return result; // the browser stops here, and the profile saves its state
}

await withProfile(() => {
  document.cookie = 'signed_in=yes; max-age=86400; path=/';
});
console.log('next browser sees:', await withProfile(() => document.cookie));
console.log('profile holds cookies of:', (await client.profiles.get(profile.id)).cookieDomains);
await client.profiles.delete(profile.id);
