import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { InvalidCursorError } from '../../common/src/errors.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { RunRepository, migrations } from './run.repository.js';

for (const driver of await drivers()) {
  describe(`run repository on ${driver.name}`, () => {
    let db: Database;
    let repo: RunRepository;
    const dataDir = tempDir('runs');
    let n = 0;
    // The repository's clock: a test moves it past a lease instead of sleeping.
    let skewMs = 0;
    const now = () => new Date(Date.now() + skewMs);
    before(async () => {
      db = await openDatabase({ service: 'run', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      repo = new RunRepository(db.knex, { now });
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    async function queue(projectId: string, sessionId = `ses_${++n}`) {
      const id = `run_${String(++n).padStart(4, '0')}`;
      if (!(await repo.session(projectId, null, sessionId))) await repo.insertSession({ id: sessionId, projectId, agent: 'browser-agent', diskId: null, workspaceId: null });
      // Ids grow with n, so runs created in the same instant are still claimed in this order.
      await repo.insertRun({ id, projectId, agent: 'browser-agent', sessionId, task: 't', model: 'builtin', browser: {}, missingFileIds: [], workspaceId: null, diskId: null });
      return id;
    }

    test('when a run changes status, then its webhook event is written in the same transaction: a failing outbox write leaves the status as it was', async () => {
      const changes: string[] = [];
      let fail = false;
      const hooked = new RunRepository(db.knex, {
        now,
        onChange: async (trx, run, change) => {
          await recordOutboxEvent(trx, { projectId: run.projectId, type: change, orderingKey: run.id, data: { id: run.id, status: run.status } });
          changes.push(`${change}:${run.status}`);
          if (fail) throw new Error('outbox unavailable');
        },
      });
      await db.knex('webhook_outbox').del();
      const id = `run_hook_${++n}`;
      await hooked.insertSession({ id: `ses_hook_${n}`, projectId: 'prj_hook', agent: 'browser-agent', diskId: null, workspaceId: null });
      await hooked.insertRun({ id, projectId: 'prj_hook', agent: 'browser-agent', sessionId: `ses_hook_${n}`, task: 't', model: 'builtin', browser: {}, missingFileIds: [], workspaceId: null, diskId: null });
      fail = true;
      await assert.rejects(hooked.finish(id, ['queued'], 'stopped'), /outbox unavailable/);
      assert.equal((await hooked.run(id))!.status, 'queued', 'the status change rolled back with its event');
      fail = false;
      assert.equal(await hooked.finish(id, ['queued'], 'stopped'), true);
      assert.deepEqual(changes, ['run.queued:queued', 'run.stopped:stopped', 'run.stopped:stopped']);
      const rows = await db.knex('webhook_outbox').orderBy('seq');
      assert.deepEqual(rows.map((r) => [r.type, JSON.parse(r.data).status]), [['run.queued', 'queued'], ['run.stopped', 'stopped']]);
    });

    test('when runs are claimed, then oldest first, never over the project limit, one per session', async () => {
      const a1 = await queue('prj_a');
      const a2 = await queue('prj_a');
      const a3 = await queue('prj_a');
      const b1 = await queue('prj_b', 'ses_shared');
      const b2 = await queue('prj_b', 'ses_shared');
      const claimed: string[] = [];
      for (;;) {
        const r = await repo.claim('w1', 10000, 2);
        if (!r) break;
        claimed.push(r.id);
        assert.equal(r.status, 'running');
      }
      assert.deepEqual(claimed, [a1, a2, b1], 'a3 waits for prj_a, b2 for its session');
      assert.equal(await repo.runningCount('prj_a'), 2);
      assert.ok(await repo.finish(a1, ['running'], 'completed', { result: 'ok' }));
      assert.ok(await repo.finish(b1, ['running'], 'completed', { result: 'ok' }));
      assert.deepEqual([(await repo.claim('w1', 10000, 2))?.id, (await repo.claim('w1', 10000, 2))?.id], [a3, b2]);
      for (const id of [a2, a3, b2]) await repo.finish(id, ['running'], 'completed');
    });

    test('when a lease is not renewed, then another owner takes the run over (takeovers counted); a renewing owner keeps its runs', async () => {
      const kept = await queue('prj_c');
      const lost = await queue('prj_c');
      assert.equal((await repo.claim('alive', 200, 5))!.id, kept);
      assert.equal((await repo.claim('dead', 200, 5))!.id, lost);
      skewMs += 1000; // past both leases
      assert.deepEqual(await repo.renewLeases('alive', [kept], 10000), []);
      const { taken, failed } = await repo.takeOverExpired('heir', 10000, 2, 'too many takeovers');
      assert.deepEqual(taken.map((r) => [r.id, r.status, r.leaseOwner, r.takeovers]), [[lost, 'running', 'heir', 1]]);
      assert.deepEqual(failed, []);
      assert.deepEqual(await repo.renewLeases('dead', [lost], 10000), [lost], 'the dead owner no longer holds it');
      assert.deepEqual(await repo.renewLeases('heir', [lost], 10000), [], 'the new owner does');
      assert.deepEqual(await repo.takeOverExpired('other', 10000, 2, 'x'), { taken: [], failed: [] }, 'a live lease is not taken');
      await repo.finish(kept, ['running'], 'completed');
      await repo.finish(lost, ['running'], 'completed');
    });

    test('when a worker says which process it is, then others see it among the holders of live leases, and ending its leases lets one take its runs over at once', async () => {
      const id = await queue('prj_gone');
      await repo.claim('crashed', 600_000, 5, 'linux:boot:1:42:7');
      assert.deepEqual(
        (await repo.otherLeaseOwners('heir')).filter((o) => o.owner === 'crashed'),
        [{ owner: 'crashed', process: 'linux:boot:1:42:7' }],
      );
      assert.deepEqual((await repo.otherLeaseOwners('crashed')).filter((o) => o.owner === 'crashed'), [], 'not its own');
      assert.deepEqual((await repo.takeOverExpired('heir', 600_000, 3, 'x')).taken, [], 'its ten-minute lease holds');
      assert.equal(await repo.expireLeasesOf('crashed'), 1);
      const { taken } = await repo.takeOverExpired('heir', 600_000, 3, 'x', 'linux:boot:1:43:8');
      assert.deepEqual(taken.map((r) => [r.id, r.leaseOwner, r.takeovers, r.handedOver]), [[id, 'heir', 1, false]]);
      assert.deepEqual((await repo.otherLeaseOwners('someone')).filter((o) => o.owner === 'heir'), [{ owner: 'heir', process: 'linux:boot:1:43:8' }], 'the heir’s process with its lease');
      await repo.finish(id, ['running'], 'completed');
      assert.deepEqual((await repo.otherLeaseOwners('someone')).filter((o) => o.owner === 'heir'), [], 'a finished run holds no lease');
    });

    test('when a worker hands a run over, then another takes it at once, told it was handed over, and a later takeover is not', async () => {
      const id = await queue('prj_hand');
      await repo.claim('leaving', 60000, 5);
      assert.equal(await repo.handOver(id, 'someone-else'), false, 'only the lease holder hands a run over');
      assert.equal(await repo.handOver(id, 'leaving'), true);
      const first = await repo.takeOverExpired('heir', 200, 3, 'x');
      assert.deepEqual(first.taken.map((r) => [r.id, r.status, r.leaseOwner, r.takeovers, r.handedOver]), [[id, 'running', 'heir', 1, true]], 'taken before its 60 s lease would have run out');
      skewMs += 1000;
      const second = await repo.takeOverExpired('next', 200, 3, 'x');
      assert.deepEqual(second.taken.map((r) => [r.id, r.takeovers, r.handedOver]), [[id, 2, false]], 'a lease that ran out is not a handover');
      await repo.finish(id, ['running'], 'completed');
      assert.equal(await repo.handOver(id, 'next'), false, 'a finished run is not handed over');
    });

    test('when a run was taken over as often as the bound allows and its lease runs out again, then it fails with the reason', async () => {
      const id = await queue('prj_bound');
      await repo.claim('w0', 200, 5);
      for (let i = 1; i <= 2; i++) {
        skewMs += 1000;
        const { taken } = await repo.takeOverExpired(`w${i}`, 200, 2, 'taken over too often');
        assert.deepEqual(taken.map((r) => [r.id, r.takeovers]), [[id, i]]);
      }
      skewMs += 1000;
      const { taken, failed } = await repo.takeOverExpired('w3', 200, 2, 'taken over too often');
      assert.deepEqual(taken, []);
      assert.deepEqual(failed.map((r) => [r.id, r.status, r.error, r.takeovers]), [[id, 'failed', 'taken over too often', 2]]);
      assert.equal((await repo.run(id))!.status, 'failed');
    });

    test('when a run is stopped while its lease runs out, then it is not taken over and stays stopped', async () => {
      const id = await queue('prj_stop');
      await repo.claim('dead', 200, 5);
      assert.ok(await repo.finish(id, ['running'], 'stopped', {}, { keepLease: true }));
      skewMs += 1000;
      assert.deepEqual(await repo.takeOverExpired('heir', 10000, 2, 'x'), { taken: [], failed: [] });
      const r = (await repo.run(id))!;
      assert.deepEqual([r.status, r.takeovers], ['stopped', 0]);
    });

    test('when two replicas race to take over the same expired runs, then each run is taken once', async () => {
      const ids = [await queue('prj_race'), await queue('prj_race'), await queue('prj_race')];
      for (let i = 0; i < ids.length; i++) await repo.claim('dead', 200, 5);
      skewMs += 1000;
      const other = new RunRepository(db.knex, { now });
      const [a, b] = await Promise.all([repo.takeOverExpired('a', 10000, 2, 'x'), other.takeOverExpired('b', 10000, 2, 'x')]);
      const taken = [...a.taken, ...b.taken];
      assert.deepEqual(taken.map((r) => r.id).sort(), ids);
      for (const id of ids) {
        const r = (await repo.run(id))!;
        assert.equal(r.takeovers, 1, 'taken once');
        assert.equal(r.leaseOwner, taken.find((t) => t.id === id)!.leaseOwner);
        await repo.finish(id, ['running'], 'completed');
      }
    });

    test('when a step is recorded with a checkpoint, then both are stored; a checkpoint is replaced by its seq; nothing is stored once the run ended', async () => {
      const id = await queue('prj_ckpt');
      await repo.claim('w', 10000, 5);
      const step = { runId: id, number: 1, url: 'about:blank', action: 'navigate', thought: 't', screenshotKey: null, ts: new Date().toISOString(), durationMs: 1 };
      assert.ok(await repo.insertStep(step, { seq: 1, memory: { thought: 't' }, state: { steps: 1, browserSteps: 1 } }));
      assert.ok(await repo.saveCheckpoint(id, { seq: 1, memory: { thought: 't', notes: ['n'] }, state: { steps: 1, browserSteps: 1, model: { next: 1 } } }));
      assert.deepEqual(await repo.checkpoints(id), [{ seq: 1, memory: { thought: 't', notes: ['n'] }, state: { steps: 1, browserSteps: 1, model: { next: 1 } } }]);
      assert.equal(await repo.lastStepNumber(id), 1);
      await repo.finish(id, ['running'], 'stopped');
      assert.equal(await repo.insertStep({ ...step, number: 2 }, { seq: 2, memory: {}, state: { steps: 2, browserSteps: 2 } }), false);
      assert.equal(await repo.saveCheckpoint(id, { seq: 2, memory: {}, state: { steps: 2, browserSteps: 2 } }), false);
      assert.equal((await repo.checkpoints(id)).length, 1);
      assert.equal(await repo.lastStepNumber(id), 1);
    });

    test('when events are appended concurrently, then their ids are 1..n without gaps', async () => {
      const id = await queue('prj_d');
      await Promise.all(Array.from({ length: 20 }, (_, i) => repo.appendEvent(id, 'step', { i })));
      const { events } = await repo.events(id, 0, 100);
      assert.deepEqual(events.map((e) => e.id), Array.from({ length: 20 }, (_, i) => i + 1));
      assert.deepEqual(events.map((e) => e.data.i).sort((a, b) => Number(a) - Number(b)), Array.from({ length: 20 }, (_, i) => i));
    });

    test('when a result, an event or a step holds NUL bytes (binary command output), then it is stored with ␀ in their place', async () => {
      const id = await queue('prj_nul');
      await repo.appendEvent(id, 'terminal.output', { chunk: 'a\u0000b' });
      await repo.insertStep({ runId: id, number: 1, url: 'about:blank', action: 'run a\u0000b', thought: 'x\u0000', screenshotKey: null, ts: new Date().toISOString(), durationMs: 1 });
      assert.equal(await repo.finish(id, ['queued'], 'completed', { result: 'out: a\u0000b' }), true);
      assert.equal((await repo.run(id))!.result, 'out: a\u2400b');
      assert.equal((await repo.events(id, 0, 10)).events[0]!.data.chunk, 'a\u0000b', 'event data (JSON) keeps the NUL itself');
      const [step] = (await repo.steps(id, 0, 10)).steps;
      assert.deepEqual([step!.action, step!.thought], ['run a\u2400b', 'x\u2400']);
    });

    test('when a run has ended, then no event or step is recorded after its terminal event, even racing the stop', async () => {
      const id = await queue('prj_end');
      await repo.claim('w1', 10000, 100);
      assert.ok(await repo.appendEvent(id, 'run.started', {}));
      // A worker's step and event race the stop; whichever order they land in, none follows run.stopped.
      const stop = (async () => {
        await repo.finish(id, ['queued', 'running'], 'stopped', {}, { keepLease: true });
        return repo.appendEvent(id, 'run.stopped', {});
      })();
      const late = Promise.all([repo.appendEvent(id, 'browser.ready', {}), repo.insertStep({ runId: id, number: 1, url: null, action: 'x', thought: null, screenshotKey: null, ts: new Date().toISOString(), durationMs: 1 })]);
      assert.ok(await stop, 'the stop is recorded');
      await late;
      assert.equal(await repo.appendEvent(id, 'step', {}), undefined);
      assert.equal(await repo.appendEvent(id, 'run.failed', { error: 'late' }), undefined, 'nor a second terminal event');
      assert.equal(await repo.insertStep({ runId: id, number: 2, url: null, action: 'y', thought: null, screenshotKey: null, ts: new Date().toISOString(), durationMs: 1 }), false);
      const types = (await repo.events(id, 0, 10)).events.map((e) => e.type);
      assert.equal(types.at(-1), 'run.stopped');
      assert.equal(types.filter((t) => t === 'run.stopped').length, 1);
      assert.deepEqual((await repo.steps(id, 0, 10)).steps.map((s) => s.number).filter((n) => n > 1), []);
    });

    test('when a run waits for a browser slot, then it is not claimed before its time unless woken, and a stopped one cannot be requeued', async () => {
      const id = await queue('prj_wait');
      const claimed = (await repo.claim('w1', 10000, 5))!;
      assert.equal(claimed.id, id);
      assert.ok(await repo.requeue(id, 'w1', new Date(now().getTime() + 60000)));
      const waiting = (await repo.run(id))!;
      assert.deepEqual([waiting.status, waiting.startedAt, waiting.leaseOwner], ['queued', null, null]);
      assert.equal(await repo.claim('w1', 10000, 5), undefined, 'not before its time');
      assert.equal(await repo.wakeWaiting('prj_other'), 0, 'another project is not woken');
      assert.equal(await repo.wakeWaiting('prj_wait'), 1);
      assert.equal((await repo.claim('w1', 10000, 5))?.id, id, 'woken, it is claimed');
      assert.ok(await repo.finish(id, ['running'], 'stopped'));
      assert.equal(await repo.requeue(id, 'w1', new Date()), false);
      assert.equal((await repo.run(id))!.status, 'stopped');
    });

    test('when sessions and runs are listed, then pages are newest first, a nextCursor pages on and a cursor not handed out is refused', async () => {
      const ids = [await queue('prj_page', 'ses_page1'), await queue('prj_page', 'ses_page2'), await queue('prj_page', 'ses_page3')];
      const p1 = await repo.runs('prj_page', 'browser-agent', {}, 2, undefined);
      const p2 = await repo.runs('prj_page', 'browser-agent', {}, 2, p1.nextCursor);
      assert.deepEqual([...p1.items, ...p2.items].map((r) => r.id), [...ids].reverse());
      assert.deepEqual([p1.hasMore, p2.hasMore, p2.nextCursor], [true, false, '']);
      const s1 = await repo.sessions('prj_page', 'browser-agent', 'open', 1, undefined);
      assert.deepEqual((await repo.sessions('prj_page', 'browser-agent', 'open', 5, s1.nextCursor)).items.map((s) => s.id), ['ses_page2', 'ses_page1']);
      for (const cursor of ['junk', `${p1.items[1]!.createdAt}|${p1.items[1]!.id}`]) {
        await assert.rejects(repo.runs('prj_page', 'browser-agent', {}, 2, cursor), InvalidCursorError, cursor);
        await assert.rejects(repo.sessions('prj_page', 'browser-agent', null, 2, cursor), InvalidCursorError, cursor);
      }
    });

    test('when a session gets its browser and its runs, then it reads them back; a closed session keeps its first reason', async () => {
      const runId = await queue('prj_ses', 'ses_dom');
      await repo.attachBrowser('ses_dom', 'brw_1');
      await repo.setLatestRun('ses_dom', runId);
      await repo.closeSession('ses_dom', 'browser stopped');
      await repo.closeSession('ses_dom', 'run stopped');
      const s = (await repo.session('prj_ses', 'browser-agent', 'ses_dom'))!;
      assert.deepEqual([s.browserId, s.latestRunId, s.status, s.closedReason], ['brw_1', runId, 'closed', 'browser stopped']);
    });

    test('when usage is added, then tokens and cost accumulate exactly', async () => {
      const id = await queue('prj_e');
      await repo.addUsage(id, { inputTokens: 100, outputTokens: 10, costUsd: 0.00045 });
      await repo.addUsage(id, { inputTokens: 50, outputTokens: 5, costUsd: 0.000225 });
      const r = (await repo.run(id))!;
      assert.deepEqual([r.totalInputTokens, r.totalOutputTokens, r.totalCostUsd], [150, 15, '0.000675']);
    });

    test('when a run is created by a request, then the run keeps that request id (and one created outside any has none)', async () => {
      await repo.insertSession({ id: 'ses_req', projectId: 'prj_req', agent: 'browsercode', diskId: null, workspaceId: null });
      const run = { projectId: 'prj_req', agent: 'browsercode' as const, sessionId: 'ses_req', task: 't', model: 'builtin', browser: {}, missingFileIds: [], workspaceId: null, diskId: null };
      await repo.insertRun({ ...run, id: 'run_req1', requestId: 'req-abc.1' });
      await repo.insertRun({ ...run, id: 'run_req2' });
      assert.equal((await repo.run('run_req1'))?.requestId, 'req-abc.1');
      assert.equal((await repo.run('run_req2'))?.requestId, null);
    });
  });
}
