import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { ConfigError, defaultInstanceId } from '../../common/src/config.js';
import { createLogger } from '../../common/src/logger.js';
import { LocalBlobStore } from './blob-store.js';
import { describeBlobStore, openBlobStore } from './blob-store.factory.js';
import { loadFileStorageConfig } from './config.js';
import { S3BlobStore } from './s3-blob-store.js';
import { startS3Server, type S3Server } from './testing/s3-server.js';

const SECRET = 'sEcReT-never-to-be-seen-0123456789';
const S3_ENV = {
  BLOB_STORE: 's3',
  S3_BUCKET: 'files',
  S3_ENDPOINT: 'https://minio.internal:9000',
  S3_REGION: 'eu-west-3',
  S3_ACCESS_KEY_ID: 'AKIAEXAMPLE',
  S3_SECRET_ACCESS_KEY: SECRET,
  S3_FORCE_PATH_STYLE: 'true',
  S3_PREFIX: 'ats/',
};

const rejected = (env: Record<string, string>, variable: RegExp) =>
  assert.throws(() => loadFileStorageConfig(env), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, variable);
    assert.ok(!e.message.includes(SECRET), 'the secret is not echoed');
    return true;
  });

test('when nothing is set, then blobs are local under DATA_DIR and temporaries are named by the host and DATA_DIR', () => {
  const c = loadFileStorageConfig({ DATA_DIR: '/srv/ats' });
  assert.deepEqual(c.store, { kind: 'local', dir: '/srv/ats/file-storage/blobs', instance: defaultInstanceId('/srv/ats') });
  assert.deepEqual(loadFileStorageConfig({ FILES_STORAGE_DIR: '/mnt/blobs', FILES_INSTANCE_ID: 'file-storage-0' }).store, { kind: 'local', dir: '/mnt/blobs', instance: 'file-storage-0' });
});

test('when BLOB_STORE=s3 with its settings, then the store is that bucket, and only the store carries the secret', () => {
  const c = loadFileStorageConfig(S3_ENV);
  assert.deepEqual(c.store, { kind: 's3', bucket: 'files', endpoint: 'https://minio.internal:9000', region: 'eu-west-3', accessKeyId: 'AKIAEXAMPLE', secretAccessKey: SECRET, forcePathStyle: true, prefix: 'ats/' });
  assert.ok(!JSON.stringify({ ...c, store: undefined }).includes(SECRET));
  const minimal = loadFileStorageConfig({ BLOB_STORE: 's3', S3_BUCKET: 'b' }).store;
  assert.deepEqual(minimal, { kind: 's3', bucket: 'b', endpoint: undefined, region: 'us-east-1', accessKeyId: undefined, secretAccessKey: undefined, forcePathStyle: false, prefix: '' }, 'the SDK default chain and AWS S3');
});

test('when the S3 settings do not fit together, then the start fails naming the variable, never echoing the secret', () => {
  rejected({ BLOB_STORE: 's3' }, /S3_BUCKET is required when BLOB_STORE=s3/);
  rejected({ ...S3_ENV, S3_ACCESS_KEY_ID: '' }, /S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are given together/);
  rejected({ ...S3_ENV, S3_FORCE_PATH_STYLE: 'perhaps' }, /S3_FORCE_PATH_STYLE must be true or false/);
  rejected({ ...S3_ENV, S3_ENDPOINT: 'minio:9000' }, /S3_ENDPOINT must/);
  rejected({ BLOB_STORE: 'gcs' }, /BLOB_STORE must be one of local, s3/);
  rejected({ FILES_INSTANCE_ID: '../elsewhere' }, /FILES_INSTANCE_ID must be/);
});

test('when the store is described for the log, then bucket and endpoint show and no credential does', () => {
  const described = describeBlobStore(loadFileStorageConfig({ ...S3_ENV, S3_ENDPOINT: 'https://user:pa55@minio.internal:9000' }).store);
  assert.deepEqual(described, { blobStore: 's3', bucket: 'files', prefix: 'ats/', endpoint: 'https://minio.internal:9000/', region: 'eu-west-3', forcePathStyle: true, credentials: 'S3_ACCESS_KEY_ID' });
  assert.ok(!/AKIAEXAMPLE|pa55|sEcReT/.test(JSON.stringify(described)));
});

describe('opening the configured store', () => {
  let s3: S3Server;
  const lines: string[] = [];
  const logger = createLogger('file-storage', 'info', { write: (l: string) => void lines.push(l) });
  before(async () => (s3 = await startS3Server()));
  after(() => s3.close());

  test('when BLOB_STORE=s3 points at a bucket that answers, then the S3 store opens and the log names the bucket, not the secret', async () => {
    // s3rver checks the key id, not the signature: any secret gets in, so this one can be told apart.
    const config = loadFileStorageConfig({ ...s3.env('ats/'), S3_SECRET_ACCESS_KEY: SECRET });
    const opened = await openBlobStore(config.store, logger);
    try {
      assert.ok(opened.store instanceof S3BlobStore);
      const said = lines.join('');
      assert.match(said, new RegExp(`"bucket":"${s3.bucket}".*"endpoint":"${s3.endpoint}/"`));
      assert.ok(!said.includes(SECRET));
    } finally {
      await opened.stop();
      await opened.stop();
    }
  });

  test('when the bucket does not exist, then opening fails with a message naming it and its endpoint', async () => {
    const config = loadFileStorageConfig({ ...s3.env(), S3_BUCKET: 'no-such-bucket', S3_SECRET_ACCESS_KEY: SECRET });
    await assert.rejects(openBlobStore(config.store, logger), (e: Error) => {
      assert.match(e.message, new RegExp(`S3 bucket "no-such-bucket" at ${s3.endpoint}/ does not answer \\(HTTP 404\\)`));
      assert.ok(!e.message.includes(SECRET));
      return true;
    });
  });

  test('when BLOB_STORE is local, then the local store opens with its temporaries in a folder of its instance', async () => {
    const dir = tempDir('open-local');
    try {
      const config = loadFileStorageConfig({ DATA_DIR: dir, FILES_INSTANCE_ID: 'one' });
      const opened = await openBlobStore(config.store, logger);
      assert.ok(opened.store instanceof LocalBlobStore);
      assert.equal(opened.store.temporaries, path.join(dir, 'file-storage', 'blobs', '.tmp', 'one'));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
