/**
 * The blob HTTP endpoint: `PUT /u/{fileId}` and `GET|HEAD /d/{blobId}` on HMAC-signed, expiring
 * links (no API key). Plain node:http: bytes stream straight between socket and disk.
 */
import http from 'node:http';
import type { Logger } from '../../common/src/logger.js';
import { redactUrl } from '../../common/src/logger.js';
import { AppError, Status } from '../../common/src/errors.js';
import { TooLargeError, type BlobStore } from './blob-store.js';
import type { FileStorage } from './file-storage.js';

function send(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json), 'Cache-Control': 'no-store', ...headers });
  res.end(json);
}

/** Why a link is refused (an expired upload link: see FileStorage.expiredUploadAdvice). */
const INVALID = 'Invalid link signature';
const DOWNLOAD_EXPIRED = "Download link expired; ask the API again for a fresh link (list the run's files, or read the steps, the browser's downloads or its recording again)";

/**
 * CORS for the links: a web page (the dashboard, a user's own app) uploads with fetch from its
 * own origin. The signed link is the whole credential and no cookie is involved, so any origin
 * may use it, as with any presigned object-store URL.
 */
const CORS: http.OutgoingHttpHeaders = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'Content-Length, Content-Range, Content-Disposition',
};
const PREFLIGHT: http.OutgoingHttpHeaders = {
  ...CORS,
  'Access-Control-Allow-Methods': 'GET, HEAD, PUT',
  'Access-Control-Allow-Headers': 'Content-Type, Range',
  'Access-Control-Max-Age': '3600',
};

/** `attachment; filename="…"` with a safe ASCII fallback and the exact UTF-8 name. */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%;]/g, '_').slice(0, 200) || 'download';
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Parses one `bytes=` range; undefined for none, 'invalid' for an unsatisfiable one. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'invalid' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'invalid';
  let start: number;
  let end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'invalid';
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start > end || start >= size) return 'invalid';
  return { start, end };
}

export function createBlobServer(files: FileStorage, store: BlobStore, logger: Logger): http.Server {
  return http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://blob');
    if (/^\/(u|d)\//.test(url.pathname)) {
      for (const [k, v] of Object.entries(CORS)) res.setHeader(k, v!);
      if (req.method === 'OPTIONS') {
        res.writeHead(204, PREFLIGHT);
        return res.end();
      }
    }
    const exp = Number(url.searchParams.get('exp'));
    const sig = url.searchParams.get('sig') ?? '';
    try {
      const upload = /^\/u\/(file_[a-z0-9]{24})$/.exec(url.pathname);
      const download = /^\/d\/(blb_[0-9a-f]{32})$/.exec(url.pathname);
      if (url.pathname === '/healthz' && req.method === 'GET') return send(res, 200, { status: 'ok' });

      if (upload && req.method === 'PUT') {
        const verdict = files.verifyUpload(upload[1]!, exp, sig);
        if (verdict !== 'ok') return send(res, 403, { detail: verdict === 'expired' ? await files.expiredUploadAdvice(upload[1]!) : INVALID }, { Connection: 'close' });
        const declared = Number(req.headers['content-length'] ?? NaN);
        if (declared > files.maxFileBytes) {
          // Refused before a byte is read; close so the client stops sending.
          return send(res, 413, { detail: `File is larger than the limit of ${files.maxFileBytes} bytes` }, { Connection: 'close' });
        }
        const f = await files.receiveUpload(upload[1]!, req, req.headers['content-type']);
        return send(res, 200, { id: f.id, name: f.name, sizeBytes: f.sizeBytes, sha256: f.sha256 });
      }

      if (download && (req.method === 'GET' || req.method === 'HEAD')) {
        const name = url.searchParams.get('name') ?? '';
        const type = url.searchParams.get('type') ?? '';
        const verdict = files.verifyDownload(download[1]!, name, type, exp, sig);
        if (verdict !== 'ok') return send(res, 403, { detail: verdict === 'expired' ? DOWNLOAD_EXPIRED : INVALID });
        const size = await store.size(download[1]!);
        if (size === undefined) return send(res, 404, { detail: 'Not found' });
        const range = parseRange(req.headers.range, size);
        if (range === 'invalid') return send(res, 416, { detail: 'Range not satisfiable' }, { 'Content-Range': `bytes */${size}` });
        const headers: http.OutgoingHttpHeaders = {
          'Content-Type': type || 'application/octet-stream',
          'Content-Length': range ? range.end - range.start + 1 : size,
          'Accept-Ranges': 'bytes',
          'Cache-Control': 'private, max-age=300',
          'X-Content-Type-Options': 'nosniff',
          ...(name ? { 'Content-Disposition': contentDisposition(name) } : {}),
          ...(range ? { 'Content-Range': `bytes ${range.start}-${range.end}/${size}` } : {}),
        };
        if (req.method === 'HEAD') {
          res.writeHead(range ? 206 : 200, headers);
          return res.end();
        }
        const stream = await store.read(download[1]!, range);
        if (!stream) return send(res, 404, { detail: 'Not found' });
        res.writeHead(range ? 206 : 200, headers);
        stream.pipe(res);
        stream.on('error', () => res.destroy());
        res.on('close', () => stream.destroy());
        return;
      }
      return send(res, upload || download ? 405 : 404, { detail: upload || download ? 'Method not allowed' : 'Not found' });
    } catch (err) {
      if (err instanceof TooLargeError) return send(res, 413, { detail: err.message }, { Connection: 'close' });
      // A request whose body was read to its end is destroyed too (autoDestroy): only an incomplete one was cut off.
      if ((req.destroyed && !req.complete) || (err as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') {
        logger.info({ path: redactUrl(req.url ?? '') }, 'upload cut off by the client; nothing kept');
        return res.destroy();
      }
      if (err instanceof AppError) {
        const status = err.code === Status.NOT_FOUND ? 404 : err.code === Status.ABORTED ? 409 : 400;
        // Refused before the body was read (a used link): close so the client stops sending.
        return send(res, status, { detail: err.message }, req.complete ? {} : { Connection: 'close' });
      }
      logger.error({ err, path: redactUrl(req.url ?? '') }, 'blob request failed');
      return send(res, 500, { detail: 'Internal error' });
    }
  });
}
