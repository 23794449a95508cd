/**
 * Two stacks on one host, each with its own DATA_DIR, do not touch each other: a browser and a
 * browsercode run in one live through the other's browser-pool dying (kill -9) and starting again
 * (its start-up sweeps reap only its own leftovers), and the killed stack serves browsers again.
 * Each pool is killed in turn.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser } from 'puppeteer-core';
import { killGroup } from '../scripts/stack.js';
import { readSse } from './support/sse.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

/** No warm browsers (faster starts, less to reap) and no recording: what is checked is who kills whose processes. */
const ENV = { POOL_WARM_SIZE: '0', RECORDING_ENABLED: 'false', DEFAULT_MODEL: 'builtin' };

describe('two stacks side by side', () => {
  const stacks: StackFixture[] = [];

  before(async () => {
    stacks.push(...(await Promise.all([startStackFixture({ env: ENV, ownNats: true }), startStackFixture({ env: ENV, ownNats: true })])));
    // The pool comes back after a kill as `make up` brings it back.
    for (const f of stacks) f.stack.supervise({ firstDelayMs: 100, maxDelayMs: 1000, log: () => undefined });
  });
  after(async () => {
    await Promise.all(stacks.map((f) => f.stop()));
  });

  const json = (f: StackFixture, method: string, url: string, body?: unknown) =>
    f.api(url, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

  /** A browser with a page whose state a restart of another pool must not lose. */
  async function browserIn(f: StackFixture): Promise<{ id: string; cdp: Browser }> {
    const res = await json(f, 'POST', '/api/v1/browsers', {});
    assert.equal(res.status, 201, await res.clone().text());
    const { id, cdpUrl } = (await res.json()) as { id: string; cdpUrl: string };
    const cdp = await puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null, protocolTimeout: 30_000 });
    const [page] = await cdp.pages();
    await page!.evaluate(() => ((globalThis as unknown as { mark: string }).mark = 'kept'));
    return { id, cdp };
  }

  test('when each stack\'s pool is killed in turn, then the other stack\'s browser and run carry on, and the killed stack creates browsers again', async () => {
    for (const [killed, other] of [[stacks[0]!, stacks[1]!], [stacks[1]!, stacks[0]!]] as const) {
      const kept = await browserIn(other);
      const run = await json(other, 'POST', '/api/v1/agents/browsercode/runs', { task: 'Run `sleep 2; echo still-here`.', model: 'builtin' });
      assert.equal(run.status, 202, await run.clone().text());
      const runId = ((await run.json()) as { id: string }).id;

      const pool = killed.stack.children.get('browser-pool')!;
      killGroup(pool.pid, 'SIGKILL');
      await until(() => killed.stack.children.get('browser-pool') !== pool && killed.stack.children.get('browser-pool')!.exitCode === null, { timeoutMs: 60_000, what: 'the killed pool restarted' });
      // It serves again: a new browser in the killed stack (the pool takes a moment to listen).
      const again = await until(
        async () => {
          const res = await json(killed, 'POST', '/api/v1/browsers', {});
          return res.status === 201 && ((await res.json()) as { id: string });
        },
        { timeoutMs: 90_000, intervalMs: 500, what: 'a browser created in the killed stack' },
      );

      const [page] = await kept.cdp.pages();
      assert.equal(await page!.evaluate(() => (globalThis as unknown as { mark: string }).mark), 'kept', "the other stack's page kept its state");
      assert.equal(((await (await json(other, 'GET', `/api/v1/browsers/${kept.id}`)).json()) as { status: string }).status, 'active');
      await readSse(await other.api(`/api/v1/agents/browsercode/runs/${runId}/events/stream`, { signal: AbortSignal.timeout(60_000) }));
      const ended = (await (await json(other, 'GET', `/api/v1/agents/browsercode/runs/${runId}`)).json()) as { status: string; error?: string };
      assert.equal(ended.status, 'completed', ended.error);

      await kept.cdp.disconnect();
      for (const [f, id] of [[other, kept.id], [killed, again.id]] as const) assert.equal((await json(f, 'POST', `/api/v1/browsers/${id}/stop`)).status, 200);
    }
  });
});
