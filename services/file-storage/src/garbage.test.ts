import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { ConflictError } from '../../common/src/errors.js';
import { createLogger } from '../../common/src/logger.js';
import { Signer } from '../../common/src/signing.js';
import type { BlobStore } from './blob-store.js';
import { FileRepository, migrations } from './file.repository.js';
import { FileStorage } from './file-storage.js';
import { BACKENDS, openBlobBackend, type BlobBackend } from './testing/blob-backends.js';

const GRACE = 60_000;

for (const driver of await drivers()) for (const backend of BACKENDS) {
  describe(`blob garbage collection on ${driver.name}, ${backend} store`, () => {
    let db: Database;
    let blobs: BlobBackend;
    let store: BlobStore;
    let files: FileStorage;
    const dataDir = tempDir('blob-gc');
    before(async () => {
      db = await openDatabase({ service: 'file-storage', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      blobs = await openBlobBackend(backend, dataDir);
      store = blobs.store;
      files = new FileStorage({
        repo: new FileRepository(db.knex),
        store,
        signer: new Signer('gc-test-secret-0123456789-0123456789'),
        logger: createLogger('file-storage', 'silent'),
        publicUrl: 'http://files.test',
        maxFileBytes: 1 << 20,
        uploadTtlSeconds: 900,
        downloadTtlSeconds: 900,
      });
    });
    after(async () => {
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      await blobs.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const bytes = async (blobId: string) => {
      const s = await store.read(blobId);
      if (!s) return undefined;
      const chunks: Buffer[] = [];
      for await (const c of s) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString();
    };

    test('when an upload link is used again, then it is refused at once and the file keeps its bytes', async () => {
      const [up] = await files.createUploads('prj_gc', { agent: 'browser-agent' }, ['notes.txt']);
      const v1 = await files.receiveUpload(up!.id, Readable.from([Buffer.from('first')]), 'text/plain');
      const stored = (await store.list()).length;
      await assert.rejects(files.receiveUpload(up!.id, Readable.from([Buffer.from('second')]), 'text/plain'), (e: unknown) => e instanceof ConflictError && /already used/.test(e.message));
      assert.equal((await store.list()).length, stored, 'nothing of the second body was kept');
      assert.equal(await bytes(v1.blobId!), 'first');
      assert.equal((await files.getFile('prj_gc', up!.id)).blobId, v1.blobId);
    });

    test('when an object is overwritten, then only its old bytes go, and only after the grace', async () => {
      const o1 = await files.putObject('prj_gc', 'runs/r1/step-1.jpg', 'image/jpeg', Readable.from([Buffer.from('shot one')]));
      const o2 = await files.putObject('prj_gc', 'runs/r1/step-1.jpg', 'image/jpeg', Readable.from([Buffer.from('shot two')]));
      const t0 = Date.now();

      assert.deepEqual(await files.collectGarbage(GRACE, t0), { deleted: 0, candidates: 1 }, 'first seen unreferenced: kept for the grace');
      assert.equal(await bytes(o1.id), 'shot one', 'a link handed out for the old version still works');
      assert.deepEqual(await files.collectGarbage(GRACE, t0 + GRACE - 1), { deleted: 0, candidates: 1 });

      assert.deepEqual(await files.collectGarbage(GRACE, t0 + GRACE), { deleted: 1, candidates: 0 });
      assert.equal(await bytes(o1.id), undefined);
      assert.equal(await bytes(o2.id), 'shot two');
      assert.equal((await files.getObject('prj_gc', 'runs/r1/step-1.jpg')).sizeBytes, 8);
    });

    test('when an object is deleted, then it is gone at once and its bytes go after the grace', async () => {
      const o = await files.putObject('prj_gc', 'recordings/parts/brw_1/1.ts', 'video/mp2t', Readable.from([Buffer.from('part one')]));
      assert.equal(await files.deleteObject('prj_gc', 'recordings/parts/brw_1/1.ts'), true);
      assert.equal(await files.deleteObject('prj_gc', 'recordings/parts/brw_1/1.ts'), false, 'deleting again says it was not there');
      await assert.rejects(files.getObject('prj_gc', 'recordings/parts/brw_1/1.ts'), /Object not found/);
      const t0 = Date.now();
      assert.deepEqual(await files.collectGarbage(GRACE, t0), { deleted: 0, candidates: 1 });
      assert.deepEqual(await files.collectGarbage(GRACE, t0 + GRACE), { deleted: 1, candidates: 0 });
      assert.equal(await bytes(o.id), undefined);
    });

    test('when a stored blob gets its row before the grace ends, then it is never deleted', async () => {
      const early = await store.put(Readable.from([Buffer.from('not yet recorded')]), 1 << 20);
      const t0 = Date.now();
      assert.equal((await files.collectGarbage(GRACE, t0)).candidates, 1);
      await new FileRepository(db.knex).putObject({ projectId: 'prj_gc', key: 'late/row.txt', blobId: early.id, sizeBytes: early.sizeBytes, sha256: early.sha256, contentType: 'text/plain' });
      assert.deepEqual(await files.collectGarbage(GRACE, t0 + 10 * GRACE), { deleted: 0, candidates: 0 });
      assert.equal(await bytes(early.id), 'not yet recorded');
    });
  });
}
