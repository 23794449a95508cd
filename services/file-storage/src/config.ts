import { commonFields, grpcClientFields, grpcFields, int, loadConfig, optionalStr, optionalUrl, port, str, DEFAULT_PORTS } from '../../common/src/config.js';

export const fileStorageConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.fileStorage),
  ...grpcClientFields,
  httpHost: str('FILES_HTTP_HOST', { default: '0.0.0.0', describe: 'Interface of the blob HTTP endpoint' }),
  httpPort: port('FILES_HTTP_PORT', { default: 8081, describe: 'Port of the blob HTTP endpoint (presigned links)' }),
  publicUrl: optionalUrl('FILES_PUBLIC_URL', ['http', 'https'], { describe: 'Base URL of presigned links as clients reach them' }),
  storageDir: optionalStr('FILES_STORAGE_DIR', { describe: 'Where blobs live; default DATA_DIR/file-storage/blobs' }),
  signingSecret: optionalStr('SIGNING_SECRET', { minLength: 32, describe: 'HMAC secret of presigned links' }),
  maxFileBytes: int('FILE_SIZE_LIMIT_BYTES', { default: 100 * 1024 * 1024, min: 1, describe: 'Largest file' }),
  uploadTtlSeconds: int('UPLOAD_URL_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86400, describe: 'Lifetime of upload links' }),
  gcIntervalSeconds: int('BLOB_GC_INTERVAL_SECONDS', { default: 600, min: 0, max: 7 * 86400, describe: 'How often unreferenced blobs are looked for; 0 = never' }),
  gcGraceSeconds: int('BLOB_GC_GRACE_SECONDS', { default: 7200, min: 0, max: 30 * 86400, describe: 'How long a blob stays unreferenced before it is deleted (longer than any link lifetime)' }),
  downloadTtlSeconds: int('DOWNLOAD_URL_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86400, describe: 'Lifetime of download links' }),
};

/** The file-storage service's configuration from the environment. */
export function loadFileStorageConfig(env: Record<string, string | undefined> = process.env) {
  const c = loadConfig(fileStorageConfigSpec, env);
  return { ...c, publicUrl: c.publicUrl ?? `http://localhost:${c.httpPort}` };
}
