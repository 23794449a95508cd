/** The browser-pool tables on every available driver (PGlite always, Postgres when it runs). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { BrowserRepository, type NewBrowser } from './browser.repository.js';
import { migrations } from './migrations.js';
import { ProfileRepository } from './profile.repository.js';

const newBrowser = (id: string, projectId: string): NewBrowser => ({
  id,
  projectId,
  profileId: null,
  sessionId: 'ses_1',
  runId: null,
  agent: 'browser-agent',
  screenWidth: 1280,
  screenHeight: 800,
  proxyCountryCode: null,
  stealth: true,
  locale: null,
  timezone: null,
  allowedDomains: null,
  blockAds: false,
  liveViewUrl: 'http://live/x',
  instanceId: 'bpi_1',
  pid: 4242,
  timeoutAt: new Date(Date.now() + 3600_000).toISOString(),
});

for (const driver of await drivers()) {
  describe(`browser-pool tables on ${driver.name}`, () => {
    let db: Database;
    let dir: string;
    let browsers: BrowserRepository;
    let profiles: ProfileRepository;
    before(async () => {
      dir = tempDir('bp-repo');
      db = await openDatabase({ service: 'browser-pool', dataDir: dir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      browsers = new BrowserRepository(db.knex, db.driver);
      profiles = new ProfileRepository(db.knex);
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test('when many browsers are created at once against a cap of 3, then exactly 3 become active', async () => {
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => browsers.insertUnderCap(newBrowser(`brw_cap${i}`, 'prj_cap'), 3, new Date())));
      assert.equal(results.filter(Boolean).length, 3);
      const first = results.find(Boolean)!;
      assert.equal(first.status, 'active');
      assert.equal(first.liveViewUrl, 'http://live/x');
      assert.equal(first.pid, 4242);
      assert.ok(await browsers.soonestTimeout('prj_cap'));
      await browsers.markStopped(first.id, 'user', new Date());
      assert.ok(await browsers.insertUnderCap(newBrowser('brw_cap_next', 'prj_cap'), 3, new Date()), 'a stopped browser frees its place');
      assert.equal(await browsers.insertUnderCap(newBrowser('brw_cap_more', 'prj_cap'), 3, new Date()), undefined);
    });

    test('when a browser is stopped twice, then only the first stop counts', async () => {
      await browsers.insertUnderCap(newBrowser('brw_twice', 'prj_t'), 10, new Date());
      const first = await browsers.markStopped('brw_twice', 'timeout', new Date());
      assert.equal(first?.stopReason, 'timeout');
      assert.ok(first?.stoppedAt);
      assert.equal(await browsers.markStopped('brw_twice', 'user', new Date()), undefined);
      assert.equal((await browsers.get('prj_t', 'brw_twice'))!.stopReason, 'timeout');
      assert.equal(await browsers.get('prj_other', 'brw_twice'), undefined, "another project's browser is not found");
    });

    test('when browsers are listed, then pages are newest first and filters apply', async () => {
      for (let i = 0; i < 5; i++) await browsers.insertUnderCap(newBrowser(`brw_list${i}`, 'prj_list'), 10, new Date(Date.now() + i * 1000));
      await browsers.markStopped('brw_list1', 'user', new Date());
      const p1 = await browsers.list('prj_list', { limit: 2 });
      assert.deepEqual(p1.items.map((b) => b.id), ['brw_list4', 'brw_list3']);
      assert.equal(p1.hasMore, true);
      const p2 = await browsers.list('prj_list', { limit: 2, cursor: p1.nextCursor });
      assert.deepEqual(p2.items.map((b) => b.id), ['brw_list2', 'brw_list1']);
      assert.deepEqual((await browsers.list('prj_list', { limit: 10, status: 'stopped' })).items.map((b) => b.id), ['brw_list1']);
      assert.equal((await browsers.list('prj_list', { limit: 10, sessionId: 'ses_none' })).items.length, 0);
    });

    test('when the recorder lists browsers, then it gets every project\'s active ones and those stopped since the given time, page by page', async () => {
      const since = new Date(Date.now() - 60_000);
      await browsers.insertUnderCap(newBrowser('brw_rec_a', 'prj_rec1'), 10, new Date());
      await browsers.insertUnderCap(newBrowser('brw_rec_b', 'prj_rec2'), 10, new Date());
      await browsers.insertUnderCap(newBrowser('brw_rec_c', 'prj_rec2'), 10, new Date());
      await browsers.insertUnderCap(newBrowser('brw_rec_d', 'prj_rec1'), 10, new Date());
      await browsers.markStopped('brw_rec_c', 'user', new Date());
      await browsers.markStopped('brw_rec_d', 'user', new Date(since.getTime() - 1000));
      const ours = (rows: { id: string }[]) => rows.map((b) => b.id).filter((id) => id.startsWith('brw_rec_'));
      const all: string[] = [];
      for (let cursor: string | undefined, page; (page = await browsers.listRecordable({ stoppedSince: since, limit: 2, ...(cursor ? { cursor } : {}) })); ) {
        all.push(...page.items.map((b) => b.id));
        if (!page.hasMore) break;
        cursor = page.nextCursor;
      }
      assert.deepEqual(ours(all.map((id) => ({ id }))), ['brw_rec_a', 'brw_rec_b', 'brw_rec_c'], 'in id order; d stopped before the time');
      assert.deepEqual(ours((await browsers.listRecordable({ stoppedSince: undefined, limit: 100 })).items), ['brw_rec_a', 'brw_rec_b'], 'active only');
    });

    test('when a profile state is saved, then it replaces the old one whole, and a deleted profile stays deleted', async () => {
      const p = await profiles.create({ id: 'prf_1', projectId: 'prj_p', name: 'Work', userId: null });
      assert.deepEqual(p.cookieDomains, []);
      assert.equal(p.lastUsedAt, null);
      assert.deepEqual(await profiles.state('prj_p', 'prf_1'), { cookies: [], origins: [] });
      const state = { cookies: [{ name: 'a', value: '1', domain: '.x.test', path: '/', httpOnly: true, secure: false }], origins: [{ origin: 'https://x.test', localStorage: [['k', 'v']] as [string, string][] }] };
      const saved = await profiles.saveState('prj_p', 'prf_1', JSON.stringify(state), ['x.test'], new Date());
      assert.deepEqual(saved!.cookieDomains, ['x.test']);
      assert.ok(saved!.lastUsedAt);
      assert.deepEqual(await profiles.state('prj_p', 'prf_1'), state);
      assert.equal(await profiles.state('prj_other', 'prf_1'), undefined);
      assert.equal((await profiles.rename('prj_p', 'prf_1', 'Home'))!.name, 'Home');
      assert.equal(await profiles.delete('prj_p', 'prf_1'), true);
      assert.equal(await profiles.delete('prj_p', 'prf_1'), false);
      assert.equal(await profiles.saveState('prj_p', 'prf_1', '{}', [], new Date()), undefined, 'a late save does not bring it back');
      assert.equal(await profiles.get('prj_p', 'prf_1'), undefined);
    });

    test('when downloads are recorded, then a changed file replaces its record', async () => {
      await browsers.putDownload({ browserId: 'brw_d', name: 'a.csv', sizeBytes: 3, lastModified: new Date(1000).toISOString(), objectKey: 'k1' });
      await browsers.putDownload({ browserId: 'brw_d', name: 'a.csv', sizeBytes: 5, lastModified: new Date(2000).toISOString(), objectKey: 'k1' });
      await browsers.putDownload({ browserId: 'brw_d', name: 'b.pdf', sizeBytes: 9, lastModified: new Date(1500).toISOString(), objectKey: 'k2' });
      assert.deepEqual((await browsers.downloads('brw_d')).map((d) => [d.name, d.sizeBytes]), [['b.pdf', 9], ['a.csv', 5]]);
    });
  });
}
