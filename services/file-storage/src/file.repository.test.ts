import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { InvalidCursorError } from '../../common/src/errors.js';
import { FileRepository, migrations } from './file.repository.js';

for (const driver of await drivers()) {
  describe(`file repository on ${driver.name}`, () => {
    let db: Database;
    let repo: FileRepository;
    const dataDir = tempDir('files-repo');
    before(async () => {
      db = await openDatabase({ service: 'file-storage', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      repo = new FileRepository(db.knex);
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    test('when a disk’s files are paged, then each page goes on by name after the last, a file added meanwhile is not repeated, and a bad cursor is refused', async () => {
      const put = (path: string) => repo.putEntry({ diskId: 'dsk_page', path, fileId: `fil_${path}`, blobId: 'blb_1', sizeBytes: 1, sha256: 'x'.repeat(64), contentType: 'text/plain', runId: null });
      for (const p of ['c.txt', 'a.txt', 'e.txt', 'b.txt', 'd/x.txt']) await put(p);
      const names: string[][] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await repo.entryPage('dsk_page', 2, cursor);
        names.push(page.items.map((e) => e.path));
        if (names.length === 1) await put('a0.txt'); // sorts before the cursor: not seen, nothing repeats
        if (!page.hasMore) break;
        cursor = page.nextCursor;
      }
      assert.deepEqual(names, [['a.txt', 'b.txt'], ['c.txt', 'd/x.txt'], ['e.txt']]);
      await assert.rejects(repo.entryPage('dsk_page', 2, 'b.txt'), InvalidCursorError, 'a file name is not a cursor');
    });

    test('when workspaces are paged, then newest first and a nextCursor pages on', async () => {
      for (const i of [1, 2, 3]) await repo.createWorkspace({ id: `wsp_${i}`, projectId: 'prj_ws', name: `w${i}`, diskId: `dsk_w${i}` });
      const p1 = await repo.workspaces('prj_ws', 2, undefined);
      const p2 = await repo.workspaces('prj_ws', 2, p1.nextCursor);
      assert.deepEqual([p1.items.map((w) => w.id), p1.hasMore, p2.items.map((w) => w.id), p2.hasMore, p2.nextCursor], [['wsp_3', 'wsp_2'], true, ['wsp_1'], false, '']);
    });
  });
}
