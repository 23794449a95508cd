/**
 * A child process serving S3 with s3rver (`startS3Server` starts it): argv = directory, bucket.
 * Prints `{"port":N}` when it listens. Its own process because s3rver's continuation tokens use
 * DES, which Node 17+ only has with --openssl-legacy-provider (a flag for this process alone).
 *
 * s3rver 3.7 lacks AbortMultipartUpload and ListMultipartUploads (405 and 501); this adds both on
 * s3rver's own upload folders, behind its own signature check, and refuses parts of an upload that
 * is gone (NoSuchUpload), as S3 does.
 */
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import S3rver from 's3rver';

const require = createRequire(import.meta.url);
type Ctx = {
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  params?: Record<string, string>;
  status: number;
  type: string;
  body: unknown;
};
type Next = () => Promise<void>;
const authentication = (require('s3rver/lib/middleware/authentication') as () => (ctx: Ctx, next: Next) => Promise<void>)();
const S3Error = require('s3rver/lib/models/error') as new (code: string, message: string, detail?: Record<string, string>) => Error;

const [directory, bucket] = process.argv.slice(2);
if (!directory || !bucket) throw new Error('usage: s3rver.process <directory> <bucket>');
const uploadsDir = path.join(directory, bucket, '._S3rver_uploads');

const xml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

interface PendingUpload {
  key: string;
  uploadId: string;
  initiated: Date;
}

async function pendingUploads(): Promise<PendingUpload[]> {
  const ids = await fs.readdir(uploadsDir).catch(() => [] as string[]);
  const found = await Promise.all(
    ids.map(async (uploadId) => {
      const keyFile = path.join(uploadsDir, uploadId, 'key');
      const [key, st] = await Promise.all([fs.readFile(keyFile, 'utf8').catch(() => undefined), fs.stat(keyFile).catch(() => undefined)]);
      return key === undefined || !st ? undefined : { key, uploadId, initiated: st.mtime };
    }),
  );
  return found.filter((u): u is PendingUpload => !!u).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.initiated.getTime() - b.initiated.getTime() || (a.uploadId < b.uploadId ? -1 : 1)));
}

async function listUploads(ctx: Ctx): Promise<void> {
  const prefix = first(ctx.query.prefix) ?? '';
  const keyMarker = first(ctx.query['key-marker']) ?? '';
  const idMarker = first(ctx.query['upload-id-marker']) ?? '';
  const max = Math.min(Number(first(ctx.query['max-uploads']) ?? 1000) || 1000, 1000);
  let all = (await pendingUploads()).filter((u) => u.key.startsWith(prefix));
  if (keyMarker) {
    const at = idMarker ? all.findIndex((u) => u.key === keyMarker && u.uploadId === idMarker) : -1;
    all = at >= 0 ? all.slice(at + 1) : all.filter((u) => u.key > keyMarker);
  }
  const page = all.slice(0, max);
  const truncated = all.length > page.length;
  const last = page[page.length - 1];
  ctx.type = 'application/xml';
  ctx.body =
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Bucket>${xml(bucket!)}</Bucket><KeyMarker>${xml(keyMarker)}</KeyMarker><UploadIdMarker>${xml(idMarker)}</UploadIdMarker>` +
    (truncated && last ? `<NextKeyMarker>${xml(last.key)}</NextKeyMarker><NextUploadIdMarker>${xml(last.uploadId)}</NextUploadIdMarker>` : '') +
    `<Prefix>${xml(prefix)}</Prefix><MaxUploads>${max}</MaxUploads><IsTruncated>${truncated}</IsTruncated>` +
    page.map((u) => `<Upload><Key>${xml(u.key)}</Key><UploadId>${xml(u.uploadId)}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`).join('') +
    '</ListMultipartUploadsResult>';
}

/** The upload's folder when `uploadId` is an upload of `key` still in progress. */
async function uploadOf(key: string, uploadId: string): Promise<string> {
  const dir = path.join(uploadsDir, path.basename(uploadId));
  if ((await fs.readFile(path.join(dir, 'key'), 'utf8').catch(() => undefined)) !== key) {
    throw new S3Error('NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.', { UploadId: uploadId });
  }
  return dir;
}

const server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true, configureBuckets: [{ name: bucket, configs: [] }] });
(server as unknown as { middleware: ((ctx: Ctx, next: Next) => Promise<void>)[] }).middleware.unshift(async (ctx, next) => {
  const [b, ...rest] = ctx.path.split('/').slice(1).map(decodeURIComponent);
  const key = rest.join('/');
  const uploadId = first(ctx.query.uploadId);
  let handler: (() => Promise<void>) | undefined;
  if (b === bucket && !key && ctx.method === 'GET' && 'uploads' in ctx.query) handler = () => listUploads(ctx);
  else if (b === bucket && key && uploadId && ctx.method === 'DELETE') {
    handler = async () => {
      await fs.rm(await uploadOf(key, uploadId), { recursive: true, force: true });
      ctx.status = 204;
    };
  } else if (b === bucket && key && uploadId && ctx.method === 'PUT') {
    await uploadOf(key, uploadId); // then s3rver stores the part
  }
  if (!handler) return next();
  ctx.params = { bucket: b!, key };
  return authentication(ctx, handler);
});

const address = await server.run();
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
process.once('SIGTERM', () => void server.close().finally(() => process.exit(0)));
