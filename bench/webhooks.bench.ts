/**
 * Webhooks: latency from a run's state change to the receiver (webhook: the outbox row's time to
 * the receiver's arrival) next to the SSE stream's latency for the same events of the same runs
 * (the event row's time to its arrival on an open stream), p50 and p95, for run.started and
 * run.completed. Same machine, same clock.
 */
import { serveSite } from '../test/support/site.js';
import { readSse } from '../test/support/sse.js';
import { startStackFixture } from '../test/support/stack-fixture.js';
import { startWebhookReceiver } from '../test/support/webhook-receiver.js';

export interface WebhookFigures {
  runs: number;
  events: number;
  webhookMsP50: number;
  webhookMsP95: number;
  sseMsP50: number;
  sseMsP95: number;
  /** webhook p50 / SSE p50. */
  p50Ratio: number;
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const BASE = '/api/v1/agents/browser-agent';
const MEASURED = new Set(['run.started', 'run.completed']);

export async function webhooksBench(opts: { runs: number }): Promise<WebhookFigures> {
  const site = await serveSite();
  const receiver = await startWebhookReceiver();
  const f = await startStackFixture({ mode: 'dist', projects: ['hooks'], env: { LOG_LEVEL: 'warn', WEBHOOK_ALLOW_LOOPBACK: 'true', MAX_RUNNING_RUNS_PER_PROJECT: '2' } });
  const key = f.projects.hooks!.key;
  const json = (method: string, url: string, body?: unknown) =>
    f.api(url, { method, key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  try {
    const made = await json('POST', '/api/v1/webhooks', { url: receiver.url, event_types: [...MEASURED] });
    if (made.status !== 201) throw new Error(`create webhook ${made.status}: ${await made.text()}`);
    const webhook: number[] = [];
    const sse: number[] = [];
    for (let i = 0; i < opts.runs; i++) {
      const res = await json('POST', `${BASE}/runs`, { task: `Open ${site.url('run-table.html')}. Extract the title`, model: 'builtin' });
      if (res.status !== 202) throw new Error(`create run ${res.status}: ${await res.text()}`);
      const { id } = (await res.json()) as { id: string };
      const hooked = receiver.seen((h) => (JSON.parse(h.body) as { type: string; data: { id: string } }).type === 'run.completed' && JSON.parse(h.body).data.id === id);
      await readSse(await f.api(`${BASE}/runs/${id}/events/stream`, { key }), (e) => {
        const d = e.data as unknown as { type: string; ts: string };
        if (MEASURED.has(d.type)) sse.push(Date.now() - Date.parse(d.ts));
        return false;
      });
      await hooked;
      for (const h of receiver.received) {
        const b = JSON.parse(h.body) as { type: string; createdAt: string; data: { id: string } };
        if (b.data.id === id && MEASURED.has(b.type)) webhook.push(h.receivedAt - Date.parse(b.createdAt));
      }
    }
    return {
      runs: opts.runs,
      events: webhook.length,
      webhookMsP50: pct(webhook, 50),
      webhookMsP95: pct(webhook, 95),
      sseMsP50: pct(sse, 50),
      sseMsP95: pct(sse, 95),
      p50Ratio: pct(webhook, 50) / Math.max(pct(sse, 50), 1),
    };
  } finally {
    await f.stop();
    await receiver.close();
    await site.close();
  }
}
