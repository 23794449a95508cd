/** The local store's temporaries: one folder per instance, swept only by its owner (or once abandoned). */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { until } from '../../../test/support/until.js';
import { LocalBlobStore, STALE_LEFTOVER_MS, type StoredBlob } from './blob-store.js';

async function text(s: Readable | undefined): Promise<string | undefined> {
  if (!s) return undefined;
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}

const files = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);

/** A put whose body the test feeds, once its temporary exists: it stays in flight until `finish` or `cut`. */
async function inFlight(store: LocalBlobStore): Promise<{ done: Promise<StoredBlob>; finish(last: string): void; cut(): void }> {
  const body = new Readable({ read() {} });
  body.push(randomBytes(64 * 1024).toString('hex'));
  const done = store.put(body, 1 << 30);
  done.catch(() => undefined);
  await until(() => files(store.temporaries).length === 1, { what: 'the upload’s temporary' });
  return {
    done,
    finish: (last) => (body.push(last), body.push(null)),
    cut: () => body.destroy(new Error('the client went away')),
  };
}

describe('local blob store temporaries', () => {
  const root = path.join(tempDir('blob-store'), 'blobs');
  after(() => fs.rmSync(path.dirname(root), { recursive: true, force: true }));

  test('when a second instance starts on the same directory, then its sweep leaves the first one’s upload in flight alone', async () => {
    const first = new LocalBlobStore(root, { instance: 'pod-a' });
    const upload = await inFlight(first);

    const second = new LocalBlobStore(root, { instance: 'pod-b' });
    assert.deepEqual(await second.sweep(), { own: 0, stale: 0 });
    assert.equal(files(first.temporaries).length, 1, 'the temporary in flight is still there');

    upload.finish('the end');
    const blob = await upload.done;
    assert.match((await text(await second.read(blob.id)))!, /the end$/, 'the upload completed whole, visible to both');
    assert.deepEqual(files(first.temporaries), []);
  });

  test('when an instance restarts under the same name, then it removes what its predecessor left', async () => {
    const crashed = new LocalBlobStore(root, { instance: 'pod-c' });
    const upload = await inFlight(crashed);

    const restarted = new LocalBlobStore(root, { instance: 'pod-c' });
    assert.deepEqual(await restarted.sweep(), { own: 1, stale: 0 });
    assert.deepEqual(files(restarted.temporaries), []);
    upload.cut();
    await assert.rejects(upload.done);
  });

  test('when a replaced instance’s temporaries are over a day old, then any instance removes them and its folder', async () => {
    const replaced = new LocalBlobStore(root, { instance: 'pod-gone' });
    const upload = await inFlight(replaced);
    const legacy = path.join(root, '.tmp', 'blb_0123456789abcdef0123456789abcdef.part'); // the layout before per-instance folders
    fs.writeFileSync(legacy, 'partial');

    const other = new LocalBlobStore(root, { instance: 'pod-d' });
    assert.deepEqual(await other.sweep(STALE_LEFTOVER_MS, Date.now()), { own: 0, stale: 0 }, 'young: perhaps still in flight');
    assert.deepEqual(await other.sweep(STALE_LEFTOVER_MS, Date.now() + STALE_LEFTOVER_MS + 60_000), { own: 0, stale: 2 });
    assert.equal(fs.existsSync(replaced.temporaries), false, 'the abandoned folder is gone');
    assert.equal(fs.existsSync(legacy), false);
    upload.cut();
    await assert.rejects(upload.done);

    // An instance that was only idle that long gets its folder back on its next upload.
    const blob = await replaced.put(Readable.from([Buffer.from('still here')]), 1024);
    assert.equal(await text(await other.read(blob.id)), 'still here');
  });
});
