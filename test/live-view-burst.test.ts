/**
 * Live view holds under a burst: browsers started at once all get a live view link, every answer
 * of live-view during the burst (gRPC MintLiveViewUrl and GetRecording, the gateway's GET
 * /browsers/{id}/recording) comes within a bound, every recording starts, and after the stop every
 * recording is fetchable. The figures (p99 and how late recordings start) are measured against a
 * baseline in bench/live-view-burst.bench.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { liveViewBurst } from './support/live-view-burst.js';
import { browsersOf } from './support/recordings.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';

/** Browsers started at once (the goal is 50; two cores hold this many in a test's time). */
const N = Number(process.env.ATS_BURST_BROWSERS ?? 10);
/** Every live-view answer during the burst, p99 (generous: the machine is shared; the goal is 200 ms). */
const P99_BOUND_MS = 2000;
/** No single answer near the 5 s deadline the callers use. */
const MAX_BOUND_MS = 4000;

let f: StackFixture;
const videos = tempDir('burst-videos');

before(async () => {
  f = await startStackFixture({ projects: ['alpha'], env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: String(N + 1), POOL_WARM_SIZE: '2' } });
});
after(async () => {
  await f?.stop();
});

test(`when ${N} browsers start at once, then each has a live view link, live-view answers within its bound all along, and every recording starts and is fetchable after the stop`, async () => {
  const alpha = f.projects.alpha!;
  const fig = await liveViewBurst(f, alpha, N, { timeoutMs: 60000 });
  console.log(
    `burst of ${N}: ${fig.calls} live-view answers, p50 ${fig.p50Ms.toFixed(1)} ms, p99 ${fig.p99Ms.toFixed(1)} ms, max ${fig.maxMs.toFixed(1)} ms, failed ${fig.failed};` +
      ` links at create ${fig.withLinkAtCreate}/${N}; recordings started by max ${Math.max(...fig.recordingLateMs)} ms after creation (launch included), ${Math.max(...fig.recordingAfterReplyMs)} ms after the create reply; burst ${fig.burstMs} ms`,
  );
  assert.equal(fig.created.length, N + 1, 'every browser created');
  assert.equal(fig.failed, 0, 'no live-view call failed during the burst');
  assert.ok(fig.p99Ms < P99_BOUND_MS, `live-view p99 ${fig.p99Ms.toFixed(1)} ms during the burst (bound ${P99_BOUND_MS} ms)`);
  assert.ok(fig.maxMs < MAX_BOUND_MS, `slowest live-view answer ${fig.maxMs.toFixed(1)} ms (bound ${MAX_BOUND_MS} ms)`);

  // Every browser has its link: in the create reply, or (when live-view could not mint it then) on the record once minted later.
  const b = browsersOf(f, () => alpha.key, videos);
  for (const created of fig.created) {
    const now = await b.get(created.id);
    assert.match(now.liveViewUrl ?? '', /^https?:\/\/.+\/browsers\/.+\?token=/, `${created.id} has a live view link`);
  }

  // Every recording is finished and fetchable after the stop, lasting the browser's life.
  const stopped = await Promise.all(fig.created.map((c) => b.stop(c.id)));
  for (const s of stopped) {
    const seconds = await b.recordedSeconds(s.id, 90000);
    const lived = (Date.parse(s.stoppedAt!) - Date.parse(s.createdAt)) / 1000;
    assert.ok(Math.abs(seconds - lived) < 1.5, `${s.id}: recording ${seconds} s for a browser that lived ${lived} s`);
  }
});
