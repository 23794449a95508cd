import path from 'node:path';
import { bool, commonFields, outboxFields, ConfigError, grpcClientFields, grpcFields, instanceId, instanceIdProblem, int, loadConfig, oneOf, optionalStr, optionalUrl, port, str, DEFAULT_PORTS } from '../../common/src/config.js';
import type { S3Settings } from './s3-blob-store.js';

export const fileStorageConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.fileStorage),
  ...grpcClientFields,
  ...outboxFields,
  httpHost: str('FILES_HTTP_HOST', { default: '0.0.0.0', describe: 'Interface of the blob HTTP endpoint' }),
  httpPort: port('FILES_HTTP_PORT', { default: 8081, describe: 'Port of the blob HTTP endpoint (presigned links)' }),
  publicUrl: optionalUrl('FILES_PUBLIC_URL', ['http', 'https'], { describe: 'Base URL of presigned links as clients reach them' }),
  blobStore: oneOf('BLOB_STORE', ['local', 's3'], { default: 'local', describe: 'Where file bytes live: a local directory, or an S3-compatible bucket (every replica shares it)' }),
  storageDir: optionalStr('FILES_STORAGE_DIR', { describe: 'Where blobs live with BLOB_STORE=local; default DATA_DIR/file-storage/blobs' }),
  instanceId: instanceId('FILES_INSTANCE_ID', 'Names this replica; with BLOB_STORE=local its temporaries live in FILES_STORAGE_DIR/.tmp/<id>, swept only by a process of the same id'),
  s3Bucket: optionalStr('S3_BUCKET', { describe: 'The bucket (required with BLOB_STORE=s3)' }),
  s3Endpoint: optionalUrl('S3_ENDPOINT', ['http', 'https'], { describe: 'An S3-compatible endpoint (MinIO, Ceph, R2 …); unset = AWS S3' }),
  s3Region: str('S3_REGION', { default: 'us-east-1', describe: 'The bucket’s region' }),
  s3AccessKeyId: optionalStr('S3_ACCESS_KEY_ID', { describe: 'Access key; unset (with the secret) = the SDK’s default chain (AWS_* variables, profile, IAM role)' }),
  s3SecretAccessKey: optionalStr('S3_SECRET_ACCESS_KEY', { describe: 'Secret of S3_ACCESS_KEY_ID (never logged)' }),
  s3ForcePathStyle: bool('S3_FORCE_PATH_STYLE', { default: false, describe: 'Path-style URLs (endpoint/bucket/key), as MinIO and most self-hosted stores need' }),
  s3Prefix: str('S3_PREFIX', { default: '', describe: 'Prepended to every object key, e.g. files/ (the bucket may hold other things)' }),
  signingSecret: optionalStr('SIGNING_SECRET', { minLength: 32, describe: 'HMAC secret of presigned links' }),
  maxFileBytes: int('FILE_SIZE_LIMIT_BYTES', { default: 100 * 1024 * 1024, min: 1, describe: 'Largest file' }),
  uploadTtlSeconds: int('UPLOAD_URL_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86400, describe: 'Lifetime of upload links' }),
  gcIntervalSeconds: int('BLOB_GC_INTERVAL_SECONDS', { default: 600, min: 0, max: 7 * 86400, describe: 'How often unreferenced blobs are looked for; 0 = never' }),
  gcGraceSeconds: int('BLOB_GC_GRACE_SECONDS', { default: 7200, min: 0, max: 30 * 86400, describe: 'How long a blob stays unreferenced before it is deleted (longer than any link lifetime)' }),
  downloadTtlSeconds: int('DOWNLOAD_URL_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86400, describe: 'Lifetime of download links' }),
};

/** Where blobs live: a local directory (per-instance temporaries) or an S3-compatible bucket. */
export type BlobStoreConfig = { kind: 'local'; dir: string; instance: string } | ({ kind: 's3' } & S3Settings);

/** The file-storage service's configuration from the environment. */
export function loadFileStorageConfig(env: Record<string, string | undefined> = process.env) {
  const { s3Bucket, s3Endpoint, s3Region, s3AccessKeyId, s3SecretAccessKey, s3ForcePathStyle, s3Prefix, ...c } = loadConfig(fileStorageConfigSpec, env);
  const problems = [instanceIdProblem('FILES_INSTANCE_ID', c.instanceId)].filter((p) => p !== undefined);
  if (c.blobStore === 's3') {
    if (!s3Bucket) problems.push('S3_BUCKET is required when BLOB_STORE=s3');
    if (!s3AccessKeyId !== !s3SecretAccessKey) problems.push('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are given together (or neither, for the SDK’s default chain)');
  }
  if (problems.length) throw new ConfigError(problems);
  // The S3 settings (the secret among them) live in `store` only.
  const store: BlobStoreConfig =
    c.blobStore === 's3'
      ? { kind: 's3', bucket: s3Bucket!, endpoint: s3Endpoint, region: s3Region, accessKeyId: s3AccessKeyId, secretAccessKey: s3SecretAccessKey, forcePathStyle: s3ForcePathStyle, prefix: s3Prefix }
      : { kind: 'local', dir: c.storageDir ?? path.join(c.dataDir, 'file-storage', 'blobs'), instance: c.instanceId };
  return { ...c, store, publicUrl: c.publicUrl ?? `http://localhost:${c.httpPort}` };
}
