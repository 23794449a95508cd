/**
 * NATS killed (-9) and started again, on PGlite and on Postgres: every service that uses it is
 * connected again within 5 s of the restart (`/healthz` says `nats` SERVING, and the subjects the
 * services follow have subscribers again), and the recording of a browser stopped during the outage
 * is finished and fetchable.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { startNats } from '../scripts/stack.js';
import { freshDatabase, postgresUrl, type FreshDatabase } from './support/infra.js';
import { browsersOf } from './support/recordings.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

/** The bound the brief sets: restart → every service connected and subscribed again. */
const RECOVERY_MS = 5000;
/**
 * Subjects the services subscribe to (live-view's recorder and run's sessions: browser lifecycle;
 * run's scheduler: wake-ups and stops). Probing them with an empty message is harmless: it names
 * no project, no run of ours and no browser. (browser-pool only publishes: `/healthz` covers it.)
 */
const FOLLOWED = ['ats.browser.brw_probe.started', 'ats.runs.wakeup', 'ats.run.run_probe.stop'];

const pg = await postgresUrl();

for (const backend of ['pglite', 'postgres'] as const) {
  describe(`NATS outage on ${backend}`, { skip: backend === 'postgres' && !pg && 'needs Postgres on 127.0.0.1:5432' }, () => {
    let f: StackFixture;
    let db: FreshDatabase | undefined;
    const videos = tempDir('nats-outage-videos');

    before(async () => {
      db = backend === 'postgres' ? await freshDatabase(pg!, 'ats_nats_outage') : undefined;
      f = await startStackFixture({ ownNats: true, databaseUrl: db?.url, projects: ['alpha'], env: { POOL_WARM_SIZE: '0' } });
    });
    after(async () => {
      await f?.stop();
      await db?.drop();
    });

    const health = async () => {
      const res = await fetch(`${f.stack.baseUrl}/healthz`);
      return { status: res.status, body: (await res.json()) as { status: string; services: Record<string, string> } };
    };

    /** True when every subject in FOLLOWED has a subscriber (a request to one without any fails at once with "no responders"). */
    const subscribed = async () => {
      const nc = await connect({ servers: f.stack.natsUrl, token: f.stack.natsToken, maxReconnectAttempts: 0 });
      try {
        for (const subject of FOLLOWED) {
          const answer = await nc.request(subject, new Uint8Array(), { timeout: 300 }).then(
            () => 'answered',
            (err: Error) => (/no responders|503/i.test(`${err.message} ${(err as { code?: string }).code ?? ''}`) ? 'nobody' : 'subscribed'),
          );
          if (answer === 'nobody') return false;
        }
        return true;
      } finally {
        await nc.close();
      }
    };

    test('when NATS is killed and restarted, then every service is connected and subscribed again within 5 s, and a browser stopped meanwhile gets its recording', async () => {
      const b = browsersOf(f, () => f.projects.alpha!.key, videos);
      assert.deepEqual(await health(), { status: 200, body: { status: 'ok', services: { run: 'SERVING', 'browser-pool': 'SERVING', 'file-storage': 'SERVING', 'live-view': 'SERVING', webhooks: 'SERVING', nats: 'SERVING' } } });
      assert.equal(await subscribed(), true, 'before the outage, every followed subject has a subscriber');
      const doomed = await b.create();
      const survivor = await b.create();

      const nats = f.stack.nats!;
      const port = Number(new URL(f.stack.natsUrl).port);
      process.kill(nats.pid!, 'SIGKILL');
      await new Promise((r) => nats.once('exit', r));
      // The services notice at once (the socket closes): /healthz says NATS is not serving.
      await until(async () => (await health()).body.services.nats === 'NOT_SERVING', { timeoutMs: 10000, intervalMs: 100, what: `nats NOT_SERVING in /healthz\n${f.logs()}` });
      const outage = await health();
      assert.equal(outage.status, 503);
      assert.equal(outage.body.status, 'degraded');

      // A browser stopped while NATS is down: its `stopped` event is lost.
      const stopped = await b.stop(doomed.id);
      assert.equal(stopped.status, 'stopped');

      const again = await startNats(path.join(f.dataDir, 'nats'), (l) => f.stack.opts.onLine?.('nats', l), { port, token: f.stack.natsToken! });
      f.stack.nats = again.child;
      const restartedAt = Date.now();
      await until(async () => (await health()).status === 200, { timeoutMs: 30000, intervalMs: 50, what: `/healthz ok after the restart\n${f.logs()}` });
      const healthyMs = Date.now() - restartedAt;
      await until(subscribed, { timeoutMs: 30000, intervalMs: 50, what: 'every followed subject subscribed again' });
      const subscribedMs = Date.now() - restartedAt;
      console.log(`[${backend}] NATS restart → /healthz ok: ${healthyMs} ms; → every followed subject subscribed: ${subscribedMs} ms`);
      assert.ok(healthyMs < RECOVERY_MS, `/healthz ok ${healthyMs} ms after the restart (bound ${RECOVERY_MS} ms)`);
      assert.ok(subscribedMs < RECOVERY_MS, `subscribed again ${subscribedMs} ms after the restart (bound ${RECOVERY_MS} ms)`);

      // The browser stopped during the outage gets a finished recording lasting its life.
      const seconds = await b.recordedSeconds(doomed.id, 60000);
      const lived = (Date.parse(stopped.stoppedAt!) - Date.parse(stopped.createdAt)) / 1000;
      assert.ok(Math.abs(seconds - lived) < 1.5, `recording ${seconds} s for a browser that lived ${lived} s`);

      // The one still running is still recorded after the outage, through its stop.
      const last = await b.stop(survivor.id);
      const survivorSeconds = await b.recordedSeconds(survivor.id, 60000);
      const survivorLived = (Date.parse(last.stoppedAt!) - Date.parse(last.createdAt)) / 1000;
      assert.ok(Math.abs(survivorSeconds - survivorLived) < 1.5, `recording ${survivorSeconds} s for a browser that lived ${survivorLived} s`);
    });
  });
}
