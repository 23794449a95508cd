/**
 * Files through the real stack: the gateway's routes, presigned links on the file-storage
 * process, gRPC for attach and disks, and a crash of file-storage mid-upload. Everything that
 * moves bytes runs on both blob stores (the local directory, an S3 bucket on s3rver).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent } from '../gen/ats/common/v1/common.js';
import { FileKind, FileStorageServiceService } from '../gen/ats/filestorage/v1/file_storage.js';
import { defaultInstanceId } from '../services/common/src/config.js';
import { RemoteError, Status } from '../services/common/src/errors.js';
import { createServiceClient } from '../services/common/src/grpc.js';
import { materializeDisk, syncDisk, type FileStorageClient } from '../services/file-storage/src/client/disk-sync.js';
import { S3BlobStore } from '../services/file-storage/src/s3-blob-store.js';
import { BACKENDS } from '../services/file-storage/src/testing/blob-backends.js';
import { NOT_RECORDED, startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { until } from './support/until.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

async function putBytes(uploadUrl: string, bytes: Buffer | string) {
  const res = await fetch(uploadUrl, { method: 'PUT', body: typeof bytes === 'string' ? bytes : new Uint8Array(bytes) });
  assert.equal(res.status, 200, await res.clone().text());
}

/**
 * Starts a PUT, sends `size` bytes (chunked, unless headers declare a Content-Length) and waits for
 * the answer without ending the body, as a refused upload gets it. Every byte sent is one the server
 * reads before it answers, so its close cannot reset the connection over an unread answer.
 */
function putUnfinished(url: string, size: number, headers: Record<string, string | number> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url.replace('localhost', '127.0.0.1'), { method: 'PUT', headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    req.flushHeaders();
    const chunk = Buffer.alloc(MiB, 7);
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const n = Math.min(chunk.length, size - sent);
        sent += n;
        if (!req.write(chunk.subarray(0, n))) return void req.once('drain', pump);
      }
    };
    pump();
  });
}

const MiB = 1024 * 1024;
/** Small enough that going past it is quick; larger than one S3 part (8 MiB), so a multipart upload is cut short. */
const SIZE_LIMIT = 12 * MiB;

for (const backend of BACKENDS) {
  describe(`files on the ${backend} store`, () => {
    let f: StackFixture;
    let storage: FileStorageClient;
    before(async () => {
      f = await startStackFixture({ projects: ['alpha', 'beta'], blobStore: backend, env: { ...NOT_RECORDED, FILE_SIZE_LIMIT_BYTES: String(SIZE_LIMIT) } });
      storage = createServiceClient(FileStorageServiceService, `127.0.0.1:${f.stack.ports.get('file-storage')}`, 5000, f.stack.internalToken);
    });
    after(async () => {
      storage.close();
      await f.stop();
    });

    const alpha = () => f.projects.alpha!;
    const beta = () => f.projects.beta!;
    const json = (key: string, method: string, url: string, body?: unknown) =>
      f.api(url, { method, key, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

    async function addFiles(key: string, names: string[], url = '/api/v1/agents/browser-agent/files') {
      const res = await json(key, 'POST', url, { files: names.map((name) => ({ name })) });
      assert.equal(res.status, 201, await res.clone().text());
      return ((await res.json()) as { items: { id: string; name: string; upload_url: string }[] }).items;
    }

    /** Uploads under way in the store: temporaries in this instance's folder (local), incomplete multipart uploads (S3). */
    async function inFlight(): Promise<number> {
      if (backend === 'local') return fs.readdirSync(path.join(f.dataDir, 'file-storage', 'blobs', '.tmp', defaultInstanceId(f.dataDir))).length;
      const store = new S3BlobStore(f.stack.s3!.settings());
      try {
        let n = 0;
        for await (const _ of store.pendingUploads()) n++;
        return n;
      } finally {
        await store.stop();
      }
    }

    describe('add, upload, attach, list, download', () => {
      test('when an upload link is used a second time, then it is 409 and the file keeps its bytes; a new add uploads again', async () => {
        const [item] = await addFiles(alpha().key, ['once.txt']);
        await putBytes(item!.upload_url, 'first');
        const again = await fetch(item!.upload_url, { method: 'PUT', body: 'second' });
        assert.equal(again.status, 409);
        const detail = ((await again.json()) as { detail: string }).detail;
        assert.match(detail, /already used; add the file again/);
        assert.ok(!detail.includes('sig='));
        const { file } = await storage.api.getFile({ projectId: alpha().projectId, fileId: item!.id });
        assert.equal(await (await fetch(file!.downloadUrl)).text(), 'first');

        const [fresh] = await addFiles(alpha().key, ['once.txt']);
        assert.notEqual(fresh!.id, item!.id);
        await putBytes(fresh!.upload_url, 'second');
        const { file: second } = await storage.api.getFile({ projectId: alpha().projectId, fileId: fresh!.id });
        assert.equal(await (await fetch(second!.downloadUrl)).text(), 'second');
      });

      test('when two files are added and one known and one unknown id attached, then the unknown is missing and the known downloads exactly', async () => {
        const items = await addFiles(alpha().key, ['notes.txt', 'data.json']);
        assert.deepEqual(items.map((i) => i.name), ['notes.txt', 'data.json']);
        assert.ok(items.every((i) => i.id.startsWith('file_') && i.upload_url.includes('sig=')));
        const notes = randomBytes(200_000);
        await putBytes(items[0]!.upload_url, notes);
        await putBytes(items[1]!.upload_url, '{"a":1}');

        const created = await json(alpha().key, 'POST', '/api/v1/agents/browser-agent/runs', { task: 'Extract the title', attached_file_ids: [items[0]!.id, 'file_doesnotexist000000000000'] });
        assert.equal(created.status, 202);
        const { id: runId, missingFileIds } = (await created.json()) as { id: string; missingFileIds: string[] };
        assert.deepEqual(missingFileIds, ['file_doesnotexist000000000000']);

        const list = await f.api(`/api/v1/agents/browser-agent/runs/${runId}/files?kind=input`, { key: alpha().key });
        assert.equal(list.status, 200);
        const { items: listed } = (await list.json()) as { items: { id: string; name: string; kind: string; downloadUrl: string; sizeBytes: number }[] };
        assert.deepEqual(listed.map((i) => [i.id, i.name, i.kind, i.sizeBytes]), [[items[0]!.id, 'notes.txt', 'input', notes.length]]);
        const got = await fetch(listed[0]!.downloadUrl);
        assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(notes));
        const tampered = listed[0]!.downloadUrl.replace(/sig=(.)/, (_m, c) => `sig=${c === 'A' ? 'B' : 'A'}`);
        assert.equal((await fetch(tampered)).status, 403);

        const outputs = await f.api(`/api/v1/agents/browser-agent/runs/${runId}/files?kind=output`, { key: alpha().key });
        assert.deepEqual(((await outputs.json()) as { items: unknown[] }).items, []);
        for (const [key, url] of [
          [alpha().key, '/api/v1/agents/browser-agent/runs/run_doesnotexist00000000000/files'],
          [beta().key, `/api/v1/agents/browser-agent/runs/${runId}/files`],
          [alpha().key, `/api/v1/agents/browsercode/runs/${runId}/files`],
        ] as const) {
          const res = await f.api(url, { key });
          assert.equal(res.status, 404, `${url} is not found`);
          assert.deepEqual(await res.json(), { detail: 'Run not found' });
        }
      });

      test('when a download link is fetched with a Range, then 206 with exactly those bytes and their Content-Range', async () => {
        const [item] = await addFiles(alpha().key, ['movie.bin']);
        const bytes = randomBytes(9 * MiB + 7); // more than one S3 part
        await putBytes(item!.upload_url, bytes);
        const { file } = await storage.api.getFile({ projectId: alpha().projectId, fileId: item!.id });
        const whole = await fetch(file!.downloadUrl);
        assert.equal(whole.headers.get('content-length'), String(bytes.length));
        assert.equal(sha(Buffer.from(await whole.arrayBuffer())), sha(bytes));

        const [start, end] = [8 * MiB - 5, 8 * MiB + 4]; // across the parts' seam
        const part = await fetch(file!.downloadUrl, { headers: { Range: `bytes=${start}-${end}` } });
        assert.equal(part.status, 206);
        assert.equal(part.headers.get('content-range'), `bytes ${start}-${end}/${bytes.length}`);
        assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(start, end + 1));
        const first = await fetch(file!.downloadUrl, { headers: { Range: 'bytes=0-0' } });
        assert.deepEqual(Buffer.from(await first.arrayBuffer()), bytes.subarray(0, 1));
        const tail = await fetch(file!.downloadUrl, { headers: { Range: 'bytes=-3' } });
        assert.deepEqual(Buffer.from(await tail.arrayBuffer()), bytes.subarray(bytes.length - 3));
        assert.equal((await fetch(file!.downloadUrl, { headers: { Range: `bytes=${bytes.length}-` } })).status, 416);
      });

      test('when an upload grows past the size limit, then 413, the file stays pending and nothing of it is kept; the link still takes a smaller file', async () => {
        const [big] = await addFiles(alpha().key, ['big.bin']);
        const streamed = await putUnfinished(big!.upload_url, SIZE_LIMIT + 1);
        assert.equal(streamed.status, 413);
        assert.match(streamed.body, new RegExp(`larger than the limit of ${SIZE_LIMIT} bytes`));
        const declared = await putUnfinished(big!.upload_url, 0, { 'Content-Length': SIZE_LIMIT + 1 });
        assert.equal(declared.status, 413, 'a declared size over the limit is refused before reading');
        assert.equal((await storage.api.getFile({ projectId: alpha().projectId, fileId: big!.id })).file!.uploaded, false);
        await until(async () => (await inFlight()) === 0, { timeoutMs: 5000, what: 'the cut-off upload removed' });

        const small = randomBytes(1000);
        await putBytes(big!.upload_url, small);
        const { file } = await storage.api.getFile({ projectId: alpha().projectId, fileId: big!.id });
        assert.equal(sha(Buffer.from(await (await fetch(file!.downloadUrl)).arrayBuffer())), sha(small));
      });

      test("when another project's file is attached, or the other agent's, then it is missing", async () => {
        const [theirs] = await addFiles(beta().key, ['secret.txt']);
        await putBytes(theirs!.upload_url, 'beta only');
        const [code] = await addFiles(alpha().key, ['script.py'], '/api/v1/agents/browsercode/files');
        await putBytes(code!.upload_url, 'print(1)');
        const [pending] = await addFiles(alpha().key, ['never-uploaded.txt']);
        const { disk } = await storage.api.createDisk({ projectId: alpha().projectId, agent: Agent.AGENT_BROWSER_AGENT, sessionId: 'ses_two' });
        const r = await storage.api.attachFiles({ projectId: alpha().projectId, agent: Agent.AGENT_BROWSER_AGENT, diskId: disk!.id, runId: 'run_x', fileIds: [theirs!.id, code!.id, pending!.id] });
        assert.deepEqual(r.attachedFileIds, []);
        assert.deepEqual(r.missingFileIds, [theirs!.id, code!.id, pending!.id]);
      });

      // Refused before a byte is stored: once is enough.
      if (backend === 'local') test('when a file name is unsafe, then 422 at the gateway and INVALID_ARGUMENT at the service', async () => {
        const res = await json(alpha().key, 'POST', '/api/v1/agents/browser-agent/files', { files: [{ name: '../etc/passwd' }] });
        assert.equal(res.status, 422);
        await assert.rejects(storage.api.createUploads({ projectId: alpha().projectId, agent: Agent.AGENT_BROWSER_AGENT, files: [{ name: 'a/b' }] }), (err: unknown) => err instanceof RemoteError && err.code === Status.INVALID_ARGUMENT);
      });
    });

    describe('workspaces', () => {
      test('when a workspace is created, filled, renamed and deleted, then each step shows; another project gets 404', async () => {
        const created = await json(alpha().key, 'POST', '/api/v1/agent-workspaces', { name: 'shared' });
        assert.equal(created.status, 201);
        const ws = (await created.json()) as { id: string; name: string };
        assert.match(ws.id, /^wsp_/);

        assert.equal((await json(beta().key, 'GET', `/api/v1/agent-workspaces/${ws.id}`)).status, 404);
        assert.equal((await json(beta().key, 'POST', `/api/v1/agent-workspaces/${ws.id}/files`, { files: [{ name: 'x' }] })).status, 404);
        assert.equal((await json(beta().key, 'DELETE', `/api/v1/agent-workspaces/${ws.id}`)).status, 404);

        const [item] = await addFiles(alpha().key, ['input.csv'], `/api/v1/agent-workspaces/${ws.id}/files`);
        await putBytes(item!.upload_url, 'a,b\n1,2\n');
        const files = await json(alpha().key, 'GET', `/api/v1/agent-workspaces/${ws.id}/files`);
        const listed = ((await files.json()) as { items: { name: string; downloadUrl: string }[] }).items;
        assert.deepEqual(listed.map((i) => i.name), ['input.csv']);
        assert.equal(await (await fetch(listed[0]!.downloadUrl)).text(), 'a,b\n1,2\n');

        const renamed = await json(alpha().key, 'PATCH', `/api/v1/agent-workspaces/${ws.id}`, { name: 'renamed' });
        assert.equal(((await renamed.json()) as { name: string }).name, 'renamed');
        const all = await json(alpha().key, 'GET', '/api/v1/agent-workspaces');
        assert.ok(((await all.json()) as { items: { id: string }[] }).items.some((w) => w.id === ws.id));
        assert.deepEqual(((await (await json(beta().key, 'GET', '/api/v1/agent-workspaces')).json()) as { items: unknown[] }).items, []);

        assert.equal((await json(alpha().key, 'DELETE', `/api/v1/agent-workspaces/${ws.id}`)).status, 204);
        assert.equal((await json(alpha().key, 'GET', `/api/v1/agent-workspaces/${ws.id}`)).status, 404);
      });
    });

    describe('disks for agent workers', () => {
      test('when a disk is materialised, changed by a process and synced, then exactly the new and modified files are outputs', async () => {
        const p = alpha().projectId;
        const items = await addFiles(alpha().key, ['keep.txt', 'edit.txt', 'drop.txt'], '/api/v1/agents/browsercode/files');
        for (const [i, item] of items.entries()) await putBytes(item.upload_url, `original ${i}\n`);
        const { disk } = await storage.api.createDisk({ projectId: p, agent: Agent.AGENT_BROWSERCODE, sessionId: 'ses_disk' });
        const runId = 'run_disk_1';
        await storage.api.attachFiles({ projectId: p, agent: Agent.AGENT_BROWSERCODE, diskId: disk!.id, runId, fileIds: items.map((i) => i.id) });

        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-work-'));
        const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-outside-'));
        fs.writeFileSync(path.join(outside, 'host-secret.txt'), 'not for the disk');
        try {
          const manifest = await materializeDisk(storage, p, disk!.id, dir);
          assert.deepEqual([...manifest.keys()].sort(), ['drop.txt', 'edit.txt', 'keep.txt']);
          assert.equal(fs.readFileSync(path.join(dir, 'edit.txt'), 'utf8'), 'original 1\n');

          // The "agent": a separate process edits, creates, deletes, and plants a symlink out of the disk.
          const script = `echo changed >> edit.txt && mkdir -p out && echo '{"ok":true}' > out/result.json && rm drop.txt && ln -s ${outside}/host-secret.txt leak.txt && ln -s ${outside} outdir`;
          assert.equal(spawnSync('sh', ['-c', script], { cwd: dir }).status, 0);

          const synced = await syncDisk(storage, p, disk!.id, runId, dir, manifest);
          assert.deepEqual(synced.written.map((e) => e.path), ['edit.txt', 'out/result.json']);
          assert.deepEqual(synced.deleted, ['drop.txt']);

          // The run is made up here, so its files are read over gRPC (the public route asks the run service first).
          const listRun = async (kind: FileKind) => (await storage.api.listRunFiles({ projectId: p, agent: Agent.AGENT_BROWSERCODE, runId, kind, limit: 0, cursor: '' })).items;
          const out = await listRun(FileKind.FILE_KIND_OUTPUT);
          assert.deepEqual(out.map((o) => [o.name, o.kind]), [['edit.txt', FileKind.FILE_KIND_OUTPUT], ['out/result.json', FileKind.FILE_KIND_OUTPUT]]);
          assert.equal(await (await fetch(out[0]!.downloadUrl)).text(), 'original 1\nchanged\n');
          assert.deepEqual((await listRun(FileKind.FILE_KIND_INPUT)).map((i) => i.name), ['drop.txt', 'edit.txt', 'keep.txt']);
          const all = await listRun(FileKind.FILE_KIND_UNSPECIFIED);
          assert.equal(all.length, 5);
          // Paged like every list: two at a time, the same files in the same order (inputs first, then by name).
          const paged: string[] = [];
          let cursor = '';
          let pages = 0;
          do {
            const page = await storage.api.listRunFiles({ projectId: p, agent: Agent.AGENT_BROWSERCODE, runId, kind: FileKind.FILE_KIND_UNSPECIFIED, limit: 2, cursor });
            assert.ok(page.items.length <= 2);
            assert.equal(page.hasMore, page.nextCursor !== '');
            paged.push(...page.items.map((f) => `${f.kind}:${f.name}`));
            cursor = page.nextCursor;
            pages++;
          } while (cursor);
          assert.equal(pages, 3);
          assert.deepEqual(paged, all.map((f) => `${f.kind}:${f.name}`));

          // Over a run's cap on output files, new files are skipped (a file it stored before is still stored again).
          for (const e of synced.written) manifest.set(e.path, e.sha256);
          manifest.delete('drop.txt');
          fs.writeFileSync(path.join(dir, 'edit.txt'), 'changed again\n');
          for (const n of ['n1.txt', 'n2.txt', 'n3.txt']) fs.writeFileSync(path.join(dir, n), n);
          const capped = await syncDisk(storage, p, disk!.id, runId, dir, manifest, {}, { max: 3, stored: new Set(['edit.txt', 'out/result.json']) });
          assert.deepEqual(capped.written.map((e) => e.path), ['edit.txt', 'n1.txt']);
          assert.deepEqual(capped.overCap.map((e) => e.path), ['n2.txt', 'n3.txt']);
          assert.match(capped.overCap[0]!.reason, /limit of 3 output files/);
          assert.equal((await listRun(FileKind.FILE_KIND_OUTPUT)).length, 3);
          for (const n of ['n1.txt', 'n2.txt', 'n3.txt']) fs.rmSync(path.join(dir, n));
          for (const e of capped.written) manifest.set(e.path, e.sha256);
          assert.deepEqual((await syncDisk(storage, p, disk!.id, runId, dir, manifest)).deleted, ['n1.txt']);
          manifest.delete('n1.txt');

          const { entries } = await storage.api.listDiskEntries({ projectId: p, diskId: disk!.id });
          assert.deepEqual(entries.map((e) => e.path), ['edit.txt', 'keep.txt', 'out/result.json'], 'no symlink reached the disk');

          // A second materialisation elsewhere sees the synced state; a planted symlink is not written through.
          const again = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-work-'));
          fs.symlinkSync(outside, path.join(again, 'out'));
          await assert.rejects(materializeDisk(storage, p, disk!.id, again));
          assert.deepEqual(fs.readdirSync(outside), ['host-secret.txt']);
          fs.rmSync(again, { recursive: true, force: true });
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
          fs.rmSync(outside, { recursive: true, force: true });
        }
      });

      if (backend === 'local') test('when a disk path tries to escape, then the service refuses it', async () => {
        const p = alpha().projectId;
        const { disk } = await storage.api.createDisk({ projectId: p, agent: Agent.AGENT_BROWSERCODE, sessionId: 'ses_escape' });
        for (const bad of ['../escape.txt', '/etc/passwd', 'a/../../b']) {
          const { stream, response } = storage.api.writeDiskFile();
          stream.write({ header: { projectId: p, diskId: disk!.id, path: bad, runId: '', contentType: '' } });
          stream.write({ chunk: Buffer.from('x') });
          stream.end();
          await assert.rejects(response, (err: unknown) => err instanceof RemoteError && err.code === Status.INVALID_ARGUMENT, bad);
        }
        await assert.rejects(storage.api.listDiskEntries({ projectId: beta().projectId, diskId: disk!.id }), (err: unknown) => err instanceof RemoteError && err.code === Status.NOT_FOUND);
      });
    });

    describe('a crash during an upload', () => {
      test('when file-storage is killed mid-upload and restarted, then no partial file is visible, earlier files are intact and the link still completes', async () => {
        const [done, cut] = await addFiles(alpha().key, ['done.bin', 'crash.bin']);
        const v1 = randomBytes(100_000);
        await putBytes(done!.upload_url, v1);

        // Start an upload that never finishes (past one S3 part), then kill the process while it is receiving.
        const received = new Promise<void>((resolve, reject) => {
          const req = http.request(cut!.upload_url.replace('localhost', '127.0.0.1'), { method: 'PUT', headers: { 'Content-Length': SIZE_LIMIT - MiB } });
          req.on('error', () => resolve());
          req.write(randomBytes(9 * MiB), (err) => (err ? reject(err) : resolve()));
        });
        await received;
        await until(async () => (await inFlight()) > 0, { timeoutMs: 5000, what: 'the upload in the store' });
        assert.equal(await inFlight(), 1, 'the upload is in flight');
        await f.stack.kill('file-storage');
        await f.stack.startService('file-storage');

        if (backend === 'local') assert.equal(await inFlight(), 0, 'the partial temporary was swept at start');
        // S3 cannot tell whose an incomplete upload is (another replica's may be in flight): it waits for the day-old sweep.
        else assert.equal(await inFlight(), 1, 'a young incomplete upload is left alone');
        const partial = (await storage.api.getFile({ projectId: alpha().projectId, fileId: cut!.id })).file!;
        assert.equal(partial.uploaded, false, 'the cut-off upload left nothing visible');
        const { file } = await storage.api.getFile({ projectId: alpha().projectId, fileId: done!.id });
        assert.equal(file!.uploaded, true);
        assert.equal(file!.sizeBytes, v1.length);
        const got = await fetch(file!.downloadUrl);
        assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(v1));

        const v2 = randomBytes(1000);
        await putBytes(cut!.upload_url, v2); // an upload that never completed did not use its link
        const completed = (await storage.api.getFile({ projectId: alpha().projectId, fileId: cut!.id })).file!;
        assert.equal(sha(Buffer.from(await (await fetch(completed.downloadUrl)).arrayBuffer())), sha(v2));
      });
    });
  });
}
