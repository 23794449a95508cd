/**
 * `make bench`: runs each benchmark and prints its figures; JSON goes to bench/results/.
 * BENCH_ONLY=name[,name] runs some: gateway, guards, files, s3, runs, queue (part of runs), browsercode, pool, lifecycle, confined-path, stealth, adblock, pool-replicas, pool-restart, takeover, live-view, live-view-idle (the idle recording part alone), live-view-burst, observe, requests, webhooks, footprint, test-loader
 * (BENCH_BASELINE=rev: the commit `requests` compares with).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../scripts/stack.js';
import { browserPoolBench, stealthCostBench } from './browser-pool.bench.js';
import { lifecycleBench, lifecycleReport } from './lifecycle.bench.js';
import { confinedPathBench } from './confined-path.bench.js';
import { adblockBench } from './adblock.bench.js';
import { poolReplicasBench } from './browser-pool-replicas.bench.js';
import { fileStorageBench } from './file-storage.bench.js';
import { s3StorageBench } from './s3-storage.bench.js';
import { idleRecordingBench, liveViewBench } from './live-view.bench.js';
import { liveViewBurstBench } from './live-view-burst.bench.js';
import { gatewayRoundtrip } from './gateway-roundtrip.bench.js';
import { idempotencyBench } from './idempotency.bench.js';
import { runQueueBench, runsBench } from './runs.bench.js';
import { browsercodeBench } from './browsercode.bench.js';
import { observeBench, promptSizeBench } from './observe.bench.js';
import { agentRequestsBench, type RequestFigures } from './agent-requests.bench.js';
import { webhooksBench } from './webhooks.bench.js';
import { takeoverBench } from './takeover.bench.js';
import { footprintBench, footprintTable } from './footprint.bench.js';
import { poolRestartBench } from './pool-restart.bench.js';
import { testLoaderBench } from './test-loader.bench.js';

const f = (n: number, d = 2) => n.toFixed(d);
const roundMs = Number(process.env.BENCH_ROUND_MS ?? 3000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

const only = (process.env.BENCH_ONLY ?? '').split(',').map((x) => x.trim()).filter(Boolean);
const want = (name: string) => !only.length || only.includes(name);

const results: Record<string, unknown> = { date: new Date().toISOString(), roundMs, rounds };
if (want('gateway')) {
  process.stdout.write(`gateway round trip: GET /api/v1/agents via gRPC (A) vs answered in the gateway (B); ${rounds} alternating rounds of ${roundMs} ms\n`);
  const rt = await gatewayRoundtrip({ roundMs, rounds });
  results.gatewayRoundtrip = rt;
  process.stdout.write('clients  A req/s   B req/s   A/B req/s  A p50 ms  B p50 ms  A p99 ms  B p99 ms  errors\n');
  for (const r of rt) {
    process.stdout.write(
      `${String(r.concurrency).padStart(7)}  ${f(r.grpc.rps, 0).padStart(7)}   ${f(r.local.rps, 0).padStart(7)}   ${f(r.rpsRatio).padStart(9)}  ${f(r.grpc.p50Ms).padStart(8)}  ${f(r.local.p50Ms).padStart(8)}  ${f(r.grpc.p99Ms).padStart(8)}  ${f(r.local.p99Ms).padStart(8)}  ${r.grpc.errors + r.local.errors}\n`,
    );
  }
}
if (want('live-view-burst')) {
  const browsers = Number(process.env.BENCH_BURST_BROWSERS ?? 10);
  process.stdout.write(`\nlive view under a burst: ${browsers} browsers started at once, live-view asked all along (gRPC mint + GetRecording, gateway GET …/recording); browsers 10 nicer alone (before) vs also in one cgroup weighing ${process.env.BENCH_BROWSER_CPU_SHARES ?? 256} (after), one stack each\n`);
  const lb = await liveViewBurstBench({ browsers });
  results.liveViewBurst = lb;
  process.stdout.write('mode                      answers  p50 ms   p99 ms   max ms  failed  links at create  rec. start max ms (after creation / after reply)  burst ms\n');
  for (const r of lb.rounds) {
    process.stdout.write(
      `${r.mode.padEnd(24)}  ${String(r.calls).padStart(7)}  ${f(r.p50Ms, 1).padStart(6)}  ${f(r.p99Ms, 1).padStart(7)}  ${f(r.maxMs, 1).padStart(7)}  ${String(r.failed).padStart(6)}  ${`${r.withLinkAtCreate}/${r.browsers}`.padStart(15)}  ${`${r.recordingLateMaxMs} / ${r.recordingAfterReplyMaxMs}`.padStart(48)}  ${String(r.burstMs).padStart(8)}\n`,
    );
  }
  process.stdout.write(`  p99 before/after ${f(lb.p99Ratio)}x, max before/after ${f(lb.maxRatio)}x\n`);
}
if (want('guards')) {
  process.stdout.write(`\ngateway guards in the database: POST …/runs (stub run service) with and without Idempotency-Key, and with the rate limiter; ${rounds} alternating rounds of ${roundMs} ms\n`);
  const gb = await idempotencyBench({ roundMs, rounds });
  results.gatewayGuards = gb;
  process.stdout.write('driver  clients  create p50 ms  +key p50 ms (Δ)    replay p50 ms  +limiter p50 ms (Δ)  create req/s  +key req/s  GET p50 ms  +limiter GET p50 ms (Δ)  errors\n');
  for (const g of gb) {
    const d = (x: number, base: number) => `${f(x)} (+${f(x - base)})`;
    process.stdout.write(
      `${g.driver.padEnd(6)}  ${String(g.concurrency).padStart(7)}  ${f(g.createBare.p50Ms).padStart(12)}  ${d(g.createKeyed.p50Ms, g.createBare.p50Ms).padStart(17)}  ${f(g.createReplay.p50Ms).padStart(13)}  ${d(g.createLimited.p50Ms, g.createBare.p50Ms).padStart(19)}` +
        `  ${f(g.createBare.rps, 0).padStart(12)}  ${f(g.createKeyed.rps, 0).padStart(10)}  ${f(g.readBare.p50Ms).padStart(10)}  ${d(g.readLimited.p50Ms, g.readBare.p50Ms).padStart(23)}` +
        `  ${[g.createBare, g.createKeyed, g.createReplay, g.createLimited, g.readBare, g.readLimited].reduce((a, r) => a + r.errors, 0)}\n`,
    );
  }
}
if (want('files')) {
  const sizeMiB = Number(process.env.BENCH_FILE_MIB ?? 256);
  process.stdout.write(`\nfile storage: ${sizeMiB} MiB through presigned links vs cp on the same disk (median of ${rounds}); POST /files at 32 clients\n`);
  const fsb = await fileStorageBench({ sizeMiB, rounds, loadMs: roundMs });
  results.fileStorage = fsb;
  process.stdout.write(`  cp ${f(fsb.cpMiBps, 0)} MiB/s   upload ${f(fsb.uploadMiBps, 0)} MiB/s (${f(fsb.uploadVsCp)} of cp)   download ${f(fsb.downloadMiBps, 0)} MiB/s (${f(fsb.downloadVsCp)} of cp)\n`);
  process.stdout.write(
    `  curl alone: file:// → file ${f(fsb.curlFileMiBps, 0)} MiB/s (download = ${f(fsb.downloadVsCurlFile)} of it), to a discarding server ${f(fsb.curlDiscardMiBps, 0)} MiB/s (upload = ${f(fsb.uploadVsCurlDiscard)} of it); download into /dev/null ${f(fsb.downloadNullMiBps, 0)} MiB/s (${f(fsb.downloadNullMiBps / fsb.cpMiBps)} of cp)\n`,
  );
  process.stdout.write(
    `  POST /agents/browser-agent/files, 32 clients: ${f(fsb.addFiles32.rps, 0)} req/s, p50 ${f(fsb.addFiles32.p50Ms)} ms, p99 ${f(fsb.addFiles32.p99Ms)} ms, errors ${fsb.addFiles32.errors}` +
      `   (GET /agents same run: ${f(fsb.agents32.rps, 0)} req/s, p50 ${f(fsb.agents32.p50Ms)} ms, p99 ${f(fsb.agents32.p99Ms)} ms)\n`,
  );
}
if (want('s3')) {
  const sizeMiB = Number(process.env.BENCH_S3_MIB ?? 64);
  process.stdout.write(`\ns3 blob store: ${sizeMiB} MiB through presigned links (curl) with the local store vs the S3 store (s3rver), and the SDK straight to s3rver (median of ${rounds})\n`);
  const s3b = await s3StorageBench({ sizeMiB, rounds });
  results.s3Storage = s3b;
  const row = (name: string, t: { uploadMiBps: number; downloadMiBps: number }) => `  ${name.padEnd(22)} upload ${f(t.uploadMiBps, 0).padStart(5)} MiB/s   download ${f(t.downloadMiBps, 0).padStart(5)} MiB/s\n`;
  process.stdout.write(row('local store', s3b.local) + row('S3 store (s3rver)', s3b.s3) + row('SDK → s3rver, raw', s3b.rawS3rver));
  process.stdout.write(
    `  S3 store / local store: upload ${f(s3b.s3VsLocalUpload)}, download ${f(s3b.s3VsLocalDownload)};  S3 store / raw s3rver: upload ${f(s3b.s3VsRawUpload)}, download ${f(s3b.s3VsRawDownload)}\n`,
  );
}
if (want('runs')) {
  process.stdout.write('\nruns (builtin model, local pages)\n');
  const rb = await runsBench({ loadMs: roundMs, samples: 5 });
  results.runs = rb;
  process.stdout.write(`  per-step overhead (step wall time minus the browser action): p50 ${f(rb.stepOverheadMsP50, 1)} ms, p95 ${f(rb.stepOverheadMsP95, 1)} ms (action itself p50 ${f(rb.stepActionMsP50, 1)} ms)\n`);
  process.stdout.write(`  POST …/runs, 32 clients: ${f(rb.createRuns32.rps, 0)} req/s, p50 ${f(rb.createRuns32.p50Ms)} ms, p99 ${f(rb.createRuns32.p99Ms)} ms, errors ${rb.createRuns32.errors}\n`);
  process.stdout.write(`  GET …/status, 32 clients: ${f(rb.status32.rps, 0)} req/s, p50 ${f(rb.status32.p50Ms)} ms, p99 ${f(rb.status32.p99Ms)} ms, errors ${rb.status32.errors}\n`);
  process.stdout.write(`  one-step run create → completed p50 ${f(rb.oneStepCompletedMsP50, 0)} ms vs cold Chromium launch + page load ${f(rb.coldLaunchAndLoadMsP50, 0)} ms (ratio ${f(rb.completedVsColdLaunch)})\n`);
}
if (want('runs') || want('queue')) {
  const n = Number(process.env.BENCH_QUEUE_RUNS ?? 320);
  process.stdout.write(`\nrun queue: ${n} runs created at 32 clients (browsercode, builtin answer: no browser), drained with the default limits, vs ${n} bare INSERTs into a like table, same driver\n`);
  const qb = await runQueueBench({ runs: n, concurrency: 32 });
  results.runQueue = qb;
  for (const q of qb) {
    process.stdout.write(
      `  ${q.driver.padEnd(8)} create p50 ${f(q.createMsP50, 1)} ms, p99 ${f(q.createMsP99, 1)} ms, all created in ${f(q.createSeconds, 1)} s, drained in ${f(q.drainSeconds, 1)} s` +
        ` | bare INSERT p50 ${f(q.insertMsP50, 2)} ms, p99 ${f(q.insertMsP99, 2)} ms, all in ${f(q.insertSeconds, 2)} s | ratio p50 ${f(q.createVsInsertP50, 0)}x, total ${f(q.createVsInsertTotal, 0)}x\n`,
    );
  }
}
if (want('browsercode')) {
  process.stdout.write('\nbrowsercode: one terminal step through the service vs bash spawned directly\n');
  const bc = await browsercodeBench({ commands: 10 });
  results.browsercode = bc;
  process.stdout.write(
    `  \`true\`: step (tool.call → tool.result) p50 ${f(bc.stepMsP50, 1)} ms, p95 ${f(bc.stepMsP95, 1)} ms; overhead beyond the command p50 ${f(bc.overheadMsP50, 1)} ms; bare bash spawn p50 ${f(bc.bareSpawnMsP50, 1)} ms (ratio ${f(bc.stepVsBareSpawn, 1)}); n=${bc.commands}\n` +
      `  writing a 1 MiB output file: step p50 ${f(bc.writeStepMsP50, 1)} ms, overhead p50 ${f(bc.writeOverheadMsP50, 1)} ms\n`,
  );
}
if (want('pool')) {
  process.stdout.write('\nbrowser pool: POST /browsers and create → CDP → goto → stop, warm pool vs pool of 0 vs bare launch\n');
  const bp = await browserPoolBench({ rounds: Math.max(5, rounds * 2), mode: 'dist' });
  results.browserPool = bp;
  process.stdout.write(`  ${JSON.stringify({ warm: bp.warm, cold: bp.cold, bareLaunchMs: bp.bareLaunchMs, provisionRatio: bp.provisionRatio, lifecycleRatio: bp.lifecycleRatio })}\n`);
  process.stdout.write(
    `  confinement: warm create → CDP → goto → stop p50 ${f(bp.warm.lifecycleMs.p50, 1)} ms confined vs ${f(bp.warmUnconfined.lifecycleMs.p50, 1)} ms with BROWSER_CONFINEMENT=off (ratio ${f(bp.confinedLifecycleRatio, 2)})\n` +
      `  launch → page loaded p50 ${f(bp.confined.launchToLoadMs.p50, 1)} ms confined vs ${f(bp.unconfined.launchToLoadMs.p50, 1)} ms unconfined; memory per browser (PSS) p50 ${f(bp.confined.pssMiB.p50, 1)} MiB vs ${f(bp.unconfined.pssMiB.p50, 1)} MiB\n`,
  );
}
if (want('lifecycle')) {
  process.stdout.write('\nbrowser lifecycle, parts and back to back: our stack (defaults, recording on) vs a pre-launched bare Chromium vs puppeteer.launch, taking turns\n');
  const lc = await lifecycleBench({ rounds: Math.max(10, rounds * 4), perClient: Math.max(3, rounds), mode: 'dist' });
  results.lifecycle = lc;
  process.stdout.write(lifecycleReport(lc));
}
if (want('confined-path')) {
  process.stdout.write('\nconfined path per request: a GET straight vs through an egress proxy (name lookup cached vs each time); a 1 MiB CDP answer to the pool vs relayed to a client\n');
  const cp = await confinedPathBench(Math.max(100, rounds * 50));
  results.confinedPath = cp;
  process.stdout.write(
    `  egress: direct p50 ${f(cp.egress.directUs.p50, 0)} µs, proxied ${f(cp.egress.proxiedUs.p50, 0)} µs (+${cp.egress.overheadUs}), proxied looking the name up each time ${f(cp.egress.proxiedNoDnsCacheUs.p50, 0)} µs (+${cp.egress.overheadNoDnsCacheUs})\n` +
      `  CDP 1 MiB answer: pool's own p50 ${f(cp.cdp.directMs.p50, 1)} ms, relayed to a client ${f(cp.cdp.relayedMs.p50, 1)} ms (+${cp.cdp.overheadMs})\n`,
  );
}
if (want('pool-replicas')) {
  const n = Math.max(5, rounds * 2);
  process.stdout.write(`\nbrowser pool replicas (Postgres): create → CDP → goto → stop, one replica vs two behind the per-call balancer (${n} each); CDP round trip through the owner's proxy vs the other replica's\n`);
  const pr = await poolReplicasBench({ rounds: n, roundTrips: 200, mode: 'dist' });
  results.poolReplicas = pr;
  process.stdout.write(
    `  lifecycle p50 ${f(pr.oneReplicaLifecycleMs.p50, 1)} ms one replica vs ${f(pr.twoReplicasLifecycleMs.p50, 1)} ms two (ratio ${f(pr.lifecycleRatio)}; p95 ${f(pr.oneReplicaLifecycleMs.p95, 1)} vs ${f(pr.twoReplicasLifecycleMs.p95, 1)} ms)\n` +
      `  steps p50, one vs two: create ${f(pr.oneReplicaStepsMs.create, 1)} vs ${f(pr.twoReplicasStepsMs.create, 1)}, connect ${f(pr.oneReplicaStepsMs.connect, 1)} vs ${f(pr.twoReplicasStepsMs.connect, 1)}, goto ${f(pr.oneReplicaStepsMs.goto, 1)} vs ${f(pr.twoReplicasStepsMs.goto, 1)}, stop ${f(pr.oneReplicaStepsMs.stop, 1)} vs ${f(pr.twoReplicasStepsMs.stop, 1)} ms\n` +
      `  Runtime.evaluate('1') p50 ${f(pr.ownerRoundTripMs.p50, 1)} ms through the owner vs ${f(pr.relayedRoundTripMs.p50, 1)} ms relayed (hop ${f(pr.relayHopMs, 2)} ms; p95 ${f(pr.ownerRoundTripMs.p95, 1)} vs ${f(pr.relayedRoundTripMs.p95, 1)} ms, n=${pr.ownerRoundTripMs.n}); errors ${pr.errors}\n`,
  );
}
if (want('pool-restart')) {
  process.stdout.write(`\npool restart: SIGKILL of the pool → CDP usable again on the same cdpUrl (the browser taken over) vs the pool's cold start, ${rounds} rounds\n`);
  const pr = await poolRestartBench({ rounds, mode: 'dist' });
  results.poolRestart = pr;
  process.stdout.write(`  kill → CDP back p50 ${f(pr.cdpBackMs.p50, 0)} ms (max ${f(pr.cdpBackMs.max, 0)}) vs cold start p50 ${f(pr.coldStartMs.p50, 0)} ms (ratio ${f(pr.ratio)})\n`);
}
if (want('takeover')) {
  const n = Math.max(3, rounds);
  process.stdout.write(`\nrun takeover (Postgres, two run replicas): a nine-step builtin run undisturbed vs its replica killed after step 1, ${n} alternating rounds\n`);
  // The default lease: the replicas share a host, so the survivor sees the dead one's process gone long before its lease runs out.
  const t = await takeoverBench({ rounds: n, mode: 'dist', leaseMs: 15000 });
  results.takeover = t;
  process.stdout.write(
    `  kill → next step p50 ${f(t.takeoverGapMs.p50, 0)} ms (max ${f(t.takeoverGapMs.max, 0)}) with a ${t.leaseMs} ms lease (${t.beyondLeaseMs} ms beyond it; below 0: taken before it ran out); an ordinary step gap p50 ${f(t.stepGapMs.p50, 0)} ms\n` +
      `  run duration p50 ${f(t.undisturbedMs.p50, 0)} ms undisturbed vs ${f(t.killedMs.p50, 0)} ms killed (ratio ${f(t.durationRatio)})\n`,
  );
}
if (want('live-view') || want('live-view-idle')) {
  const idle = await idleRecordingBench({ mode: 'dist' });
  results.idleRecording = idle;
  process.stdout.write(
    `\nrecording idle browsers: ${idle.browsers} on a still page, pool + Chromium + live-view + ffmpeg: ${f(idle.unrecordedCores, 3)} of a core unrecorded, ${f(idle.recordedCores, 3)} recorded` +
      ` (ffmpeg ${f(idle.recordedFfmpegCores, 3)}, ${idle.encoders} encoders); recording costs ${f(idle.perBrowserCores * 100, 2)} % of a core per browser\n`,
  );
}
if (want('live-view')) {
  process.stdout.write('\nlive view and recording\n');
  const lv = await liveViewBench({ mode: 'dist' });
  results.liveView = lv;
  process.stdout.write(`  ${JSON.stringify(lv)}\n`);
}
if (want('stealth')) {
  const n = Math.max(5, rounds * 2);
  const st = await stealthCostBench(n);
  results.stealthCost = st;
  process.stdout.write(`stealth cost, launch → fingerprint → page loaded → stop, ${n} alternating each: on p50 ${f(st.onMs.p50, 0)} ms, off p50 ${f(st.offMs.p50, 0)} ms (on/off ${f(st.ratio)})\n`);
}
if (want('adblock')) {
  const n = Math.max(5, rounds * 2);
  const ab = await adblockBench(n);
  results.adblock = ab;
  const kb = (b: number) => f(b / 1024, 0);
  process.stdout.write(`\nblock_ads on an ad-heavy local page (16 ad/tracker requests of 30 KB after 40 ms, 8 ad slots), ${n} alternating loads each (lists ready in ${f(ab.listLoadMs, 0)} ms)\n`);
  process.stdout.write(`  load p50: blocking ${f(ab.loadMs.blocking.p50, 0)} ms, plain ${f(ab.loadMs.plain.p50, 0)} ms (blocking/plain ${f(ab.loadMs.ratio)})\n`);
  process.stdout.write(`  per load: requests ${ab.requests.blocking} vs ${ab.requests.plain}, bytes ${kb(ab.bytes.blocking)} KiB vs ${kb(ab.bytes.plain)} KiB\n`);
  process.stdout.write(`  observation: ${ab.observation.blocking.chars} chars / ${ab.observation.blocking.elements} elements with hiding vs ${ab.observation.plain.chars} / ${ab.observation.plain.elements} without (${f(ab.observation.blocking.chars / ab.observation.plain.chars)}); ad slots hidden ${ab.hiddenSlots.blocking}/8 vs ${ab.hiddenSlots.plain}/8\n`);
}
if (want('observe')) {
  const n = Math.max(5, rounds * 3);
  process.stdout.write(`\nobservation of the fixture pages: before (innerText + top-document elements) vs after (one serialization, frames and shadow roots, viewport-centred), median of ${n}\n`);
  const ob = await observeBench({ rounds: n });
  results.observe = ob;
  process.stdout.write('page                  before ms  after ms  before chars (~tokens)  after chars (~tokens)  elements before/after\n');
  for (const o of ob) {
    process.stdout.write(
      `${o.page.padEnd(20)}  ${f(o.before.ms, 1).padStart(9)}  ${f(o.after.ms, 1).padStart(8)}  ${`${o.before.chars} (${o.before.tokens})`.padStart(22)}  ${`${o.after.chars} (${o.after.tokens})`.padStart(21)}  ${`${o.before.elements}/${o.after.elements}`.padStart(21)}\n`,
    );
  }
  const ps = await promptSizeBench();
  results.promptSize = ps;
  process.stdout.write(
    `  request size, 30-step run scrolling the 3,000-link page (messages + tools, characters): step 1 (blank tab) ${ps.step1Chars}, step 2 (top of the page) ${ps.step2Chars}, step 30 ${ps.step30Chars}, largest ${ps.maxChars} (~${Math.round(ps.maxChars / 4)} tokens)\n`,
  );
}
if (want('requests')) {
  const n = Math.max(9, rounds * 3);
  const ar = await agentRequestsBench({ rounds: n, ...(process.env.BENCH_BASELINE ? { baseline: process.env.BENCH_BASELINE } : {}) });
  results.agentRequests = ar;
  process.stdout.write(`\nbrowser-agent requests, this code (after) vs commit ${ar.baseline} (before), same run: mean characters per request of a scripted run on each page (navigate, 4 scrolls, extract, done)\n`);
  process.stdout.write('page                steps  before system/user/tools = total    after system/user/tools = total   after/before\n');
  for (const r of ar.requests) {
    const row = (x: RequestFigures['before']) => `${x.system}/${x.user}/${x.tools} = ${x.total}`.padStart(30);
    process.stdout.write(`${r.page.padEnd(18)}  ${String(r.steps).padStart(5)}  ${row(r.before)}  ${row(r.after)}  ${f(r.ratio).padStart(12)}\n`);
  }
  const o = ar.observeLargest;
  process.stdout.write(`  observe() on ${o.page}, median of ${o.rounds} alternating: before ${f(o.beforeMs, 1)} ms, after ${f(o.afterMs, 1)} ms (after/before ${f(o.ratio)})\n`);
  const c = ar.observeCustomElements;
  process.stdout.write(
    `  observe() on a page of ${c.elements} custom elements: first observation before ${f(c.firstBeforeMs, 1)} ms, after ${f(c.firstAfterMs, 1)} ms; from the 7th on (median of ${c.rounds}) before ${f(c.beforeMs, 1)} ms, after ${f(c.afterMs, 1)} ms (after/before ${f(c.ratio)})\n`,
  );
}

if (want('webhooks')) {
  const runs = Number(process.env.BENCH_WEBHOOK_RUNS ?? 8);
  process.stdout.write(`\nwebhooks: state change → receiver (webhook) vs → open SSE stream, run.started and run.completed of ${runs} builtin runs\n`);
  const w = await webhooksBench({ runs });
  results.webhooks = w;
  process.stdout.write(`webhook p50 ${f(w.webhookMsP50, 0)} ms  p95 ${f(w.webhookMsP95, 0)} ms   SSE p50 ${f(w.sseMsP50, 0)} ms  p95 ${f(w.sseMsP95, 0)} ms   webhook/SSE p50 ${f(w.p50Ratio)}  (${w.events} events)\n`);
}
if (want('footprint')) {
  process.stdout.write(`\nfootprint: the stack's PSS per process (children included) with no session and with 10 idle recorded sessions, and the CPU of an idle recorded session; previous defaults (before) vs today's (after), one stack each\n`);
  const fp = await footprintBench();
  results.footprint = fp;
  process.stdout.write(`${footprintTable(fp)}\n`);
}
if (want('test-loader')) {
  process.stdout.write(`\ntest runners: CPU of one unit test file's runner loading TypeScript with tsx (before) vs from dist/ with scripts/dist-loader.mjs (after), alternating\n`);
  const tl = testLoaderBench({ rounds });
  results.testLoader = tl;
  process.stdout.write(`${tl.files} files × ${tl.rounds} rounds: tsx ${f(tl.tsxCpuS)} CPU-s, dist ${f(tl.distCpuS)} CPU-s per file (after/before ${f(tl.ratio)})\n`);
}
const dir = path.join(ROOT, 'bench/results');
fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, `bench-${Date.now()}.json`), JSON.stringify(results, null, 2));
