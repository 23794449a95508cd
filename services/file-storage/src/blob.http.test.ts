/** The blob endpoint in-process over real HTTP, with a real database, real files and a movable clock. */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../../test/support/infra.js';
import { until, within } from '../../../test/support/until.js';
import { openDatabase, type Database } from '../../common/src/db.js';
import { createLogger } from '../../common/src/logger.js';
import { Signer } from '../../common/src/signing.js';
import { createBlobServer, parseRange } from './blob.http.js';
import { FileRepository, migrations } from './file.repository.js';
import { FileStorage } from './file-storage.js';
import { BACKENDS, openBlobBackend, type BlobBackend } from './testing/blob-backends.js';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** PUT with http.request so a body can be cut off or outlive an early answer. */
function put(url: string, body: Buffer | ((req: http.ClientRequest) => void), headers: Record<string, string | number> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    if (Buffer.isBuffer(body)) req.end(body);
    else body(req);
  });
}

for (const driver of await drivers()) for (const backend of BACKENDS) {
  describe(`blob endpoint on ${driver.name}, ${backend} store`, () => {
    let now = Date.now();
    let db: Database;
    let blobs: BlobBackend;
    let files: FileStorage;
    let server: http.Server;
    let dataDir: string;
    const project = 'prj_test';

    before(async () => {
      dataDir = tempDir('blobs');
      db = await openDatabase({ service: 'file-storage', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      blobs = await openBlobBackend(backend, dataDir);
      const { store } = blobs;
      server = createBlobServer(
        (files = new FileStorage({
          repo: new FileRepository(db.knex),
          store,
          signer: new Signer('test-secret-0123456789-0123456789', () => now),
          logger: createLogger('test', 'silent'),
          publicUrl: 'http://placeholder',
          maxFileBytes: 100 * MiB,
          uploadTtlSeconds: 900,
          downloadTtlSeconds: 900,
        })),
        store,
        createLogger('test', 'silent'),
      );
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    });
    after(async () => {
      server.close();
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      await blobs.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const base = () => `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const local = (url: string) => url.replace('http://placeholder', base());
    async function newUpload(name: string) {
      const [item] = await files.createUploads(project, { agent: 'browser-agent' }, [name]);
      return { id: item!.id, url: local(item!.uploadUrl) };
    }
    const downloadUrl = async (id: string) => local(files.fileDownloadUrl(await files.getFile(project, id)));
    const tmpCount = () => blobs.leftovers();
    const blobCount = async () => (await blobs.store.list()).length;

    test('when bytes are PUT to an upload link, then the download link returns them exactly, with type, name and ranges', async () => {
      const bytes = randomBytes(3 * MiB + 17);
      const up = await newUpload('données é.csv');
      const res = await put(up.url, bytes, { 'Content-Type': 'text/csv' });
      assert.equal(res.status, 200, res.body);
      assert.equal(JSON.parse(res.body).sha256, sha(bytes));

      const url = await downloadUrl(up.id);
      const got = await fetch(url);
      assert.equal(got.status, 200);
      assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(bytes));
      assert.equal(got.headers.get('content-type'), 'text/csv');
      assert.equal(got.headers.get('content-length'), String(bytes.length));
      assert.match(got.headers.get('content-disposition')!, /^attachment; filename="donn_es _.csv"; filename\*=UTF-8''donn%C3%A9es%20%C3%A9.csv$/);

      const part = await fetch(url, { headers: { Range: 'bytes=100-199' } });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes 100-199/${bytes.length}`);
      assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(100, 200));
      const tail = await fetch(url, { headers: { Range: 'bytes=-10' } });
      assert.deepEqual(Buffer.from(await tail.arrayBuffer()), bytes.subarray(bytes.length - 10));
      assert.equal((await fetch(url, { headers: { Range: `bytes=${bytes.length}-` } })).status, 416);
    });

    test('when a web page of another origin uploads and downloads through the links, then CORS lets it (preflight and replies), without credentials', async () => {
      const { url } = await newUpload('page.txt');
      const preflight = await fetch(url, { method: 'OPTIONS', headers: { Origin: 'http://dashboard.example', 'Access-Control-Request-Method': 'PUT', 'Access-Control-Request-Headers': 'content-type' } });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
      assert.match(preflight.headers.get('access-control-allow-methods')!, /\bPUT\b/);
      assert.match(preflight.headers.get('access-control-allow-headers')!, /content-type/i);
      assert.equal(preflight.headers.get('access-control-allow-credentials'), null);

      const put = await fetch(url, { method: 'PUT', body: 'from a page', headers: { Origin: 'http://dashboard.example', 'Content-Type': 'text/plain' } });
      assert.equal(put.status, 200);
      assert.equal(put.headers.get('access-control-allow-origin'), '*');
      const { id } = (await put.json()) as { id: string };
      const got = await fetch(await downloadUrl(id), { headers: { Origin: 'http://dashboard.example' } });
      assert.equal(got.headers.get('access-control-allow-origin'), '*');
      assert.equal(await got.text(), 'from a page');
      // A refusal is readable by the page too (its detail can be shown).
      const refused = await fetch(url.replace(/sig=[^&]+/, 'sig=bad'), { method: 'PUT', body: 'x', headers: { Origin: 'http://dashboard.example' } });
      assert.equal(refused.status, 403);
      assert.equal(refused.headers.get('access-control-allow-origin'), '*');
    });

    test('when a link is tampered with or has expired, then 403 saying how to get a working link, and nothing is served or stored', async () => {
      const up = await newUpload('a.txt');
      assert.equal((await put(up.url, Buffer.from('v1'))).status, 200);
      const url = await downloadUrl(up.id);
      const u = new URL(url);
      const sig = u.searchParams.get('sig')!;
      u.searchParams.set('sig', sig.slice(0, 5) + (sig[5] === 'A' ? 'B' : 'A') + sig.slice(6));
      assert.equal((await fetch(u)).status, 403, 'one character of the signature changed');
      const renamed = new URL(url);
      renamed.searchParams.set('name', 'other.txt');
      assert.equal((await fetch(renamed)).status, 403, 'another download name');
      const tamperedUpload = up.url.replace(/exp=(\d+)/, (_m, e) => `exp=${Number(e) + 1}`);
      assert.equal((await put(tamperedUpload, Buffer.from('evil'))).status, 403);

      const unused = await newUpload('b.txt');
      now += 901_000; // past the 15 min lifetime
      const expired = await fetch(url);
      assert.equal(expired.status, 403);
      assert.match(((await expired.json()) as { detail: string }).detail, /^Download link expired; ask the API again for a fresh link \(list the run's files/);
      const late = await put(up.url, Buffer.from('late'));
      assert.equal(late.status, 403);
      // An upload link is never renewed by listing: the file is added again, on the route it was added on.
      assert.equal(JSON.parse(late.body).detail, 'Upload link expired; add "a.txt" again (POST /api/v1/agents/browser-agent/files) for a new id and upload link');
      const lateFirst = await put(unused.url, Buffer.from('late'));
      assert.equal(lateFirst.status, 403);
      assert.match(JSON.parse(lateFirst.body).detail, /^Upload link expired; add "b\.txt" again/);
      assert.equal(JSON.parse((await put(tamperedUpload, Buffer.from('evil'))).body).detail, 'Invalid link signature');
      now -= 901_000;
      assert.equal(await (await fetch(url)).text(), 'v1', 'the stored bytes are unchanged');
    });

    test('when a 150 MiB upload declares its size against the 100 MiB cap, then 413 before reading and nothing is left', async () => {
      const up = await newUpload('big.bin');
      const stored = await blobCount();
      const res = await put(
        up.url,
        (req) => {
          const chunk = Buffer.alloc(MiB);
          let sent = 0;
          const pump = () => {
            while (sent < 150 && req.write(chunk)) sent++;
            if (sent < 150) req.once('drain', pump);
            else req.end();
          };
          req.on('error', () => {});
          pump();
        },
        { 'Content-Length': 150 * MiB },
      );
      assert.equal(res.status, 413);
      assert.equal(await tmpCount(), 0);
      assert.equal(await blobCount(), stored);
      assert.equal((await files.getFile(project, up.id)).state, 'pending');
    });

    test('when a body without a declared size grows past the cap, then it is cut off with 413 and nothing is kept', async () => {
      const up = await newUpload('stream.bin');
      const stored = await blobCount();
      const res = await put(up.url, (req) => {
        const chunk = Buffer.alloc(MiB, 1);
        let sent = 0;
        req.on('error', () => {});
        const pump = () => {
          while (sent < 101 && req.write(chunk)) sent++;
          if (sent < 101) req.once('drain', pump);
          else req.end();
        };
        pump();
      });
      assert.equal(res.status, 413);
      assert.equal(await tmpCount(), 0);
      assert.equal(await blobCount(), stored);
    });

    test('when an upload is cut off mid-way, then nothing is kept and the link still works for a complete upload', async () => {
      const up = await newUpload('keep.txt');
      const closed = new Promise<void>((resolve) => server.once('request', (req) => req.once('close', () => setImmediate(resolve))));
      await put(up.url, (req) => {
        req.on('error', () => {});
        req.write(randomBytes(9 * MiB), () => req.destroy()); // more than an S3 part: one may be on its way
      }, { 'Content-Length': 10 * MiB }).catch(() => undefined);
      await within(closed, 'the connection closed');
      await until(async () => (await tmpCount()) === 0, { timeoutMs: 2000, what: 'the partial upload removed' });
      assert.equal((await files.getFile(project, up.id)).state, 'pending', 'a cut-off upload does not use the link');
      const v1 = randomBytes(64 * 1024);
      assert.equal((await put(up.url, v1)).status, 200);
      assert.equal(sha(Buffer.from(await (await fetch(await downloadUrl(up.id))).arrayBuffer())), sha(v1));
    });

    test('when an upload link is used a second time, then 409 and the stored file is unchanged', async () => {
      const up = await newUpload('once.txt');
      assert.equal((await put(up.url, Buffer.from('first'))).status, 200);
      const stored = await blobCount();
      const again = await put(up.url, Buffer.from('second'));
      assert.equal(again.status, 409);
      assert.match(JSON.parse(again.body).detail, /already used; add the file again/);
      assert.ok(!again.body.includes('sig='), 'the link is not echoed');
      assert.equal(await (await fetch(await downloadUrl(up.id))).text(), 'first');
      assert.equal(await blobCount(), stored, 'nothing of the second body was kept');
    });

    test('when two uploads to the same link run at once, then exactly one wins whole and the other is 409', async () => {
      const up = await newUpload('race.bin');
      const a = Buffer.alloc(4 * MiB, 0xaa);
      const b = Buffer.alloc(4 * MiB, 0xbb);
      const stored = await blobCount();
      const [ra, rb] = await Promise.all([put(up.url, a), put(up.url, b)]);
      assert.deepEqual([ra.status, rb.status].sort(), [200, 409]);
      const winner = ra.status === 200 ? a : b;
      assert.equal(sha(Buffer.from(await (await fetch(await downloadUrl(up.id))).arrayBuffer())), sha(winner));
      assert.equal(await blobCount(), stored + 1, "the loser's bytes are not kept");
      assert.equal(await tmpCount(), 0);
    });
  });
}

test('when ranges are parsed, then open, suffix and bad ranges are told apart', () => {
  assert.deepEqual(parseRange('bytes=0-9', 100), { start: 0, end: 9 });
  assert.deepEqual(parseRange('bytes=90-', 100), { start: 90, end: 99 });
  assert.deepEqual(parseRange('bytes=-5', 100), { start: 95, end: 99 });
  assert.deepEqual(parseRange('bytes=50-500', 100), { start: 50, end: 99 });
  assert.equal(parseRange('bytes=100-', 100), 'invalid');
  assert.equal(parseRange('bytes=5-1', 100), 'invalid');
  assert.equal(parseRange('items=1-2', 100), 'invalid');
  assert.equal(parseRange(undefined, 100), undefined);
});
