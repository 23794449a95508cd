/** The S3 store against a real S3 HTTP server (s3rver in a child process), through the AWS SDK. */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { CreateMultipartUploadCommand, GetObjectCommand, PutObjectCommand, UploadPartCommand, type S3Client } from '@aws-sdk/client-s3';
import { until } from '../../../test/support/until.js';
import { newBlobId, TooLargeError } from './blob-store.js';
import { createS3Client, S3BlobStore } from './s3-blob-store.js';
import { startS3Server, type S3Server } from './testing/s3-server.js';

const MiB = 1024 * 1024;
const DAY = 24 * 3600_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function bytesOf(s: Readable | undefined): Promise<Buffer | undefined> {
  if (!s) return undefined;
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A body the test feeds by hand: `push` chunks, then `end()` or `fail(err)`. */
function handFed(): Readable & { fail(err: Error): void } {
  const r = new Readable({ read() {} }) as Readable & { fail(err: Error): void };
  r.fail = (err) => r.destroy(err);
  return r;
}

describe('S3 blob store on a real S3 server', () => {
  let s3: S3Server;
  let raw: S3Client;
  let store: S3BlobStore;
  const stores: S3BlobStore[] = [];
  const open = (prefix: string, options: ConstructorParameters<typeof S3BlobStore>[1] = {}) => {
    const s = new S3BlobStore(s3.settings(prefix), { partSizeBytes: 5 * MiB, ...options });
    stores.push(s);
    return s;
  };
  const pending = async (s: S3BlobStore) => {
    const found = [];
    for await (const u of s.pendingUploads()) found.push(u);
    return found;
  };

  /** A put of a hand-fed body under `maxBytes`, once more than a part of it went up. */
  const onePartSent = async (maxBytes: number) => {
    const body = handFed();
    const put = store.put(body, maxBytes);
    put.catch(() => undefined);
    body.push(randomBytes(6 * MiB));
    await until(async () => (await pending(store)).length === 1, { what: 'the first part on its way' });
    return { body, put };
  };

  before(async () => {
    s3 = await startS3Server();
    raw = createS3Client(s3.settings());
    store = open('files/');
  });
  after(async () => {
    await Promise.all(stores.map((s) => s.stop()));
    raw.destroy();
    await s3.close();
  });

  test('when a 12 MiB stream is put with 5 MiB parts, then it goes up in parts while it is still being read and reads back exactly', async () => {
    const body = handFed();
    const bytes = randomBytes(12 * MiB + 123);
    const put = store.put(body, 100 * MiB);
    body.push(bytes.subarray(0, 11 * MiB));
    // The upload is under way before the body has ended: nothing waits for the whole object.
    await until(async () => (await pending(store)).length === 1, { what: 'a multipart upload in progress' });
    body.push(bytes.subarray(11 * MiB));
    body.push(null);
    const blob = await put;

    assert.equal(blob.sizeBytes, bytes.length);
    assert.equal(blob.sha256, sha(bytes));
    assert.equal(await store.size(blob.id), bytes.length);
    assert.equal(sha((await bytesOf(await store.read(blob.id)))!), sha(bytes));
    assert.deepEqual(await pending(store), [], 'the upload was completed');
    const object = await raw.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `files/${blob.id}` }));
    assert.equal(object.ContentLength, bytes.length, 'the object is <prefix><blob id> in the bucket');
  });

  test('when a range is read, then exactly those bytes come back, across a part boundary too', async () => {
    const bytes = randomBytes(6 * MiB);
    const blob = await store.put(Readable.from([bytes]), 100 * MiB);
    const boundary = 5 * MiB;
    assert.deepEqual(await bytesOf(await store.read(blob.id, { start: boundary - 10, end: boundary + 9 })), bytes.subarray(boundary - 10, boundary + 10));
    assert.deepEqual(await bytesOf(await store.read(blob.id, { start: 0, end: 0 })), bytes.subarray(0, 1));
    assert.deepEqual(await bytesOf(await store.read(blob.id, { start: bytes.length - 3, end: bytes.length - 1 })), bytes.subarray(bytes.length - 3));
  });

  test('when a blob is missing or deleted, then size and read say undefined and deleting again is fine', async () => {
    const ghost = newBlobId();
    assert.equal(await store.size(ghost), undefined);
    assert.equal(await store.read(ghost), undefined);
    assert.equal(await store.read(ghost, { start: 0, end: 9 }), undefined);
    const blob = await store.put(Readable.from([Buffer.from('short-lived')]), 1024);
    assert.equal((await bytesOf(await store.read(blob.id)))!.toString(), 'short-lived');
    await store.delete(blob.id);
    await store.delete(blob.id);
    assert.equal(await store.size(blob.id), undefined);
    assert.ok(!(await store.list()).includes(blob.id));
    await assert.rejects(store.read('../../etc/passwd'), /invalid blob id/);
  });

  test('when an empty body is put, then an empty blob is stored', async () => {
    const blob = await store.put(Readable.from([]), 1024);
    assert.deepEqual([blob.sizeBytes, blob.sha256, await store.size(blob.id)], [0, sha(Buffer.alloc(0)), 0]);
    assert.equal((await bytesOf(await store.read(blob.id)))!.length, 0);
  });

  test('when a body grows past the cap after parts went up, then TooLargeError, no object and no incomplete upload remain', async () => {
    const before = (await store.list()).sort();
    const { body, put } = await onePartSent(7 * MiB);
    body.push(randomBytes(2 * MiB));
    body.push(null);
    await assert.rejects(put, (err: unknown) => err instanceof TooLargeError && err.limit === 7 * MiB);
    assert.deepEqual((await store.list()).sort(), before);
    assert.deepEqual(await pending(store), [], 'the multipart upload was aborted');

    await assert.rejects(store.put(Readable.from([randomBytes(2000)]), 1000), TooLargeError, 'a body under one part: never sent');
    assert.deepEqual((await store.list()).sort(), before);
  });

  test('when the body fails mid-way (a client cut off), then its error comes back and nothing is kept', async () => {
    const before = (await store.list()).sort();
    const { body, put } = await onePartSent(100 * MiB);
    body.fail(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    await assert.rejects(put, (err: unknown) => (err as NodeJS.ErrnoException).code === 'ECONNRESET');
    assert.deepEqual((await store.list()).sort(), before);
    assert.deepEqual(await pending(store), []);
  });

  test('when there are more blobs than one list page holds, then list pages through all of them', async () => {
    const paged = open('paged/', { pageSize: 2 });
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await paged.put(Readable.from([Buffer.from(`blob ${i}`)]), 1024)).id);
    assert.deepEqual((await paged.list()).sort(), ids.sort());
  });

  test('when two stores use one bucket with different prefixes, then each sees and serves only its own blobs', async () => {
    const a = open('tenant-a/');
    const b = open('tenant-a-b/'); // a prefix that starts with the other's
    const mine = await a.put(Readable.from([Buffer.from('of a')]), 1024);
    const theirs = await b.put(Readable.from([Buffer.from('of b')]), 1024);
    await raw.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'tenant-a/README.txt', Body: 'not a blob' }));

    assert.deepEqual(await a.list(), [mine.id]);
    assert.deepEqual(await b.list(), [theirs.id]);
    assert.equal(await a.size(theirs.id), undefined);
    assert.equal(await b.read(mine.id), undefined);
    await b.delete(mine.id);
    assert.equal((await bytesOf(await a.read(mine.id)))!.toString(), 'of a', "b's delete does not reach a's blob");
  });

  test('when a crashed process left multipart uploads, then the sweep aborts only blob uploads under the prefix older than a day', async () => {
    const swept = open('swept/');
    const begin = async (key: string) => {
      const { UploadId } = await raw.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: key }));
      await raw.send(new UploadPartCommand({ Bucket: s3.bucket, Key: key, UploadId, PartNumber: 1, Body: randomBytes(1024) }));
      return UploadId!;
    };
    const abandoned = `swept/${newBlobId()}`;
    await begin(abandoned);
    await begin('swept/not-a-blob');
    await begin(`elsewhere/${newBlobId()}`);

    assert.deepEqual(await swept.sweep(DAY, Date.now()), { own: 0, stale: 0 }, 'a young upload may still be in flight');
    assert.deepEqual((await pending(swept)).map((u) => u.key), [abandoned]);
    assert.deepEqual(await swept.sweep(DAY, Date.now() + DAY + 60_000), { own: 0, stale: 1 });
    assert.deepEqual(await pending(swept), []);
    assert.equal((await pending(open('elsewhere/'))).length, 1, 'another prefix is not touched');
  });

  test('when the access key is unknown, then the check fails with the server’s 403 and the secret appears nowhere in the error', async () => {
    // s3rver checks the key id but not SigV4 signatures: a wrong secret alone would pass here.
    const secret = 'wrong-secret-value-0123456789';
    const bad = new S3BlobStore({ ...s3.settings(), accessKeyId: 'NOT-A-KEY', secretAccessKey: secret });
    stores.push(bad);
    await assert.rejects(bad.check(), (err: Error & { $metadata?: { httpStatusCode?: number } }) => {
      assert.equal(err.$metadata?.httpStatusCode, 403);
      assert.ok(!`${err.message} ${err.stack} ${JSON.stringify(err)}`.includes(secret));
      return true;
    });
  });
});
