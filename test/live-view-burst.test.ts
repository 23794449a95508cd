/**
 * Live view holds under a burst: browsers started at once are all created and all get a live view
 * link, no answer of live-view during the burst (gRPC MintLiveViewUrl and GetRecording, the
 * gateway's GET /browsers/{id}/recording) fails or runs into its caller's deadline, every recording
 * starts, and after the stop every recording is fetchable. The figures (p99, and how late
 * recordings start) are printed here and measured against a baseline in
 * bench/live-view-burst.bench.ts: a speed bound in a test fails with the machine's load, not the code.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { liveViewBurst } from './support/live-view-burst.js';
import { browsersOf } from './support/recordings.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { tempDir } from './support/infra.js';

/**
 * Browsers started at once: the goal is 50, measured in bench/live-view-burst.bench.ts. Two loaded
 * cores (CI's) did not start 10 at once within the gateway's create deadline (30 s then; 55 s now).
 */
const N = Number(process.env.ATS_BURST_BROWSERS ?? 6);

let f: StackFixture;
const videos = tempDir('burst-videos');

before(async () => {
  f = await startStackFixture({ projects: ['alpha'], env: { MAX_ACTIVE_BROWSERS_PER_PROJECT: String(N + 1), POOL_WARM_SIZE: '2' } });
});
after(async () => {
  await f?.stop();
});

test(`when ${N} browsers start at once, then each is created with a live view link, no live-view answer fails, and every recording starts and is fetchable after the stop`, async () => {
  const alpha = f.projects.alpha!;
  const fig = await liveViewBurst(f, alpha, N, { timeoutMs: 60000 });
  console.log(
    `burst of ${N}: ${fig.calls} live-view answers, p50 ${fig.p50Ms.toFixed(1)} ms, p99 ${fig.p99Ms.toFixed(1)} ms, max ${fig.maxMs.toFixed(1)} ms, failed ${fig.failed};` +
      ` links at create ${fig.withLinkAtCreate}/${N}; recordings started by max ${Math.max(...fig.recordingLateMs)} ms after creation (launch included), ${Math.max(...fig.recordingAfterReplyMs)} ms after the create reply; burst ${fig.burstMs} ms`,
  );
  assert.equal(fig.created.length, N + 1, `every browser created; failed creates:\n${fig.createErrors.join('\n')}`);
  assert.equal(fig.failed, 0, 'no live-view call failed during the burst');

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
