/**
 * What a pool process's death costs a CDP client now that browsers outlive it: each round, the
 * pool is killed (SIGKILL) with no browser and started again (its cold start: spawn → listening,
 * the baseline), then killed with a browser a client had open on a page, and the time from the
 * kill until that client's cdpUrl (the same one) works again (connect + evaluate on the page) is
 * measured, while the pool starts again and takes the browser over.
 */
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';
import { serveSite } from '../test/support/site.js';
import { startStackFixture } from '../test/support/stack-fixture.js';
import { ms, stats, type Stats } from './browser-pool.bench.js';

export interface PoolRestartFigures {
  /** SIGKILL → the restarted pool listens, with no browser to take over. */
  coldStartMs: Stats;
  /** SIGKILL → CDP answers again on the same cdpUrl (page evaluate), the browser taken over. */
  cdpBackMs: Stats;
  /** cdpBack p50 / cold start p50. */
  ratio: number;
}

export async function poolRestartBench(o: { rounds: number; mode?: 'dist' | 'tsx' }): Promise<PoolRestartFigures> {
  const site = await serveSite();
  const f = await startStackFixture({ mode: o.mode ?? 'dist', projects: ['bench'], env: { LOG_LEVEL: 'warn', POOL_WARM_SIZE: '0', RECORDING_ENABLED: 'false' } });
  const key = f.projects.bench!.key;
  const api = async (method: string, path: string) => {
    const res = await f.api(`/api/v1${path}`, { method, key, headers: { 'content-type': 'application/json' }, ...(method === 'POST' && path === '/browsers' ? { body: '{}' } : {}) });
    return { status: res.status, body: (await res.json()) as { id: string; cdpUrl: string } };
  };
  const cold: number[] = [];
  const back: number[] = [];
  try {
    for (let i = 0; i < o.rounds; i++) {
      await f.stack.kill('browser-pool');
      let t0 = process.hrtime.bigint();
      await f.stack.revive('browser-pool');
      cold.push(ms(t0));

      const created = await api('POST', '/browsers');
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const client = await puppeteer.connect({ browserWSEndpoint: created.body.cdpUrl, defaultViewport: null });
      await (await client.pages())[0]!.goto(site.url('index.html'));
      await client.disconnect();
      await f.stack.kill('browser-pool');
      t0 = process.hrtime.bigint();
      const reviving = f.stack.revive('browser-pool');
      for (const deadline = Date.now() + 120_000; ; ) {
        const title = await puppeteer
          .connect({ browserWSEndpoint: created.body.cdpUrl, defaultViewport: null })
          .then(async (b) => {
            try {
              return await (await b.pages()).find((p) => p.url() === site.url('index.html'))?.evaluate(() => document.title);
            } finally {
              await b.disconnect();
            }
          })
          .catch(() => undefined);
        if (title === 'Fixture home') break;
        if (Date.now() > deadline) throw new Error(`the browser's cdpUrl did not work again within 120 s\n${f.logs('browser-pool').slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      back.push(ms(t0));
      await reviving;
      assert.equal((await api('POST', `/browsers/${created.body.id}/stop`)).status, 200);
    }
  } finally {
    await f.stop();
    await site.close();
  }
  const coldStartMs = stats(cold);
  const cdpBackMs = stats(back);
  return { coldStartMs, cdpBackMs, ratio: Math.round((cdpBackMs.p50 / coldStartMs.p50) * 100) / 100 };
}
