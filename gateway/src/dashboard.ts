/**
 * Serves the built dashboard (dashboard/dist, made by `make build`) at `/`: the page with a
 * strict Content-Security-Policy and a fresh style nonce per response, and the content-hashed
 * assets under /assets/ cached for a year (a new build has new names). Assets compressed at build
 * time (`.br`, `.gz` beside each file) are sent compressed to a browser that accepts it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import express, { type Request, type Response } from 'express';

export interface DashboardOptions {
  /** The folder of the built dashboard (index.html and assets/). */
  dir: string;
  /** Where live views are served (LIVE_VIEW_BASE_URL): the page embeds them. */
  liveViewUrl: string;
  /** Where presigned file links point (FILES_PUBLIC_URL): screenshots, recordings, uploads. */
  filesUrl: string;
}

/** The placeholder the build puts where the per-response nonce goes (vite.config.ts `html.cspNonce`). */
export const NONCE_PLACEHOLDER = 'ATS_CSP_NONCE';

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

/**
 * The policy of the page: scripts and stylesheets only from this origin (styles that the page's
 * own code creates carry the nonce), API calls to this origin, images, video and uploads to the
 * file host of presigned links, frames only from the live view host, and nobody may frame it.
 */
export function contentSecurityPolicy(o: Pick<DashboardOptions, 'liveViewUrl' | 'filesUrl'>, nonce: string): string {
  const files = new URL(o.filesUrl).origin;
  const live = new URL(o.liveViewUrl).origin;
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    `img-src 'self' ${files}`,
    `media-src ${files}`,
    `connect-src 'self' ${files}`,
    `frame-src ${live}`,
    "font-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

interface Asset {
  body: Buffer;
  br?: Buffer;
  gz?: Buffer;
  type: string;
}

function readOptional(file: string): Buffer | undefined {
  try {
    return fs.readFileSync(file);
  } catch {
    return undefined;
  }
}

/** The best encoding this request accepts among those the asset has. */
function encodingFor(req: Request, a: Asset): 'br' | 'gzip' | undefined {
  if (a.br && req.acceptsEncodings('br')) return 'br';
  if (a.gz && req.acceptsEncodings('gzip')) return 'gzip';
  return undefined;
}

function sendAsset(req: Request, res: Response, a: Asset, cacheControl: string): void {
  const enc = encodingFor(req, a);
  const body = enc === 'br' ? a.br! : enc === 'gzip' ? a.gz! : a.body;
  res.set({
    'Content-Type': a.type,
    'Cache-Control': cacheControl,
    'X-Content-Type-Options': 'nosniff',
    Vary: 'Accept-Encoding',
    ...(enc ? { 'Content-Encoding': enc } : {}),
  });
  res.status(200).end(req.method === 'HEAD' ? undefined : body);
}

/** The routes of the dashboard; mount before the gateway's catch-all 404. */
export function dashboardRouter(o: DashboardOptions): express.Router {
  const router = express.Router();
  const dir = path.resolve(o.dir);
  // An asset's name is its content's hash, so it is read once and kept; a stat per request still
  // notices a file rewritten in place by a new build while the gateway runs.
  const assets = new Map<string, Asset & { mtimeMs: number }>();
  const asset = (file: string): Asset | undefined => {
    const st = fs.statSync(file, { throwIfNoEntry: false });
    if (!st?.isFile()) return undefined;
    let a = assets.get(file);
    if (a?.mtimeMs !== st.mtimeMs) {
      a = { mtimeMs: st.mtimeMs, body: fs.readFileSync(file), br: readOptional(`${file}.br`), gz: readOptional(`${file}.gz`), type: TYPES[path.extname(file)] ?? 'application/octet-stream' };
      assets.set(file, a);
    }
    return a;
  };
  // The page is read again when a new build replaced it, so a running gateway serves the new one.
  let page: { mtimeMs: number; html: string } | undefined;
  const indexHtml = (): string | undefined => {
    const file = path.join(dir, 'index.html');
    const st = fs.statSync(file, { throwIfNoEntry: false });
    if (!st) return undefined;
    if (page?.mtimeMs !== st.mtimeMs) page = { mtimeMs: st.mtimeMs, html: fs.readFileSync(file, 'utf8') };
    return page.html;
  };

  const servePage = (req: Request, res: Response): void => {
    const html = indexHtml();
    if (html === undefined) {
      res.status(404).json({ detail: 'The dashboard is not built; run make build' });
      return;
    }
    const nonce = randomBytes(16).toString('base64');
    res.set({
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-cache',
      'Content-Security-Policy': contentSecurityPolicy(o, nonce),
      'X-Content-Type-Options': 'nosniff',
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
      'Cross-Origin-Opener-Policy': 'same-origin',
    });
    res.status(200).end(req.method === 'HEAD' ? undefined : html.replaceAll(NONCE_PLACEHOLDER, nonce));
  };
  router.get(['/', '/index.html'], servePage);

  router.get('/assets/:name', (req, res, next) => {
    const name = req.params.name as string;
    if (!/^[\w][\w.-]*$/.test(name) || name.endsWith('.br') || name.endsWith('.gz')) return next();
    const a = asset(path.join(dir, 'assets', name));
    if (!a) return next();
    return sendAsset(req, res, a, 'public, max-age=31536000, immutable');
  });
  // Unhashed files of the build's root (the icon): cached a day.
  router.get('/:name', (req, res, next) => {
    const name = req.params.name as string;
    if (!/^[\w][\w-]*\.(svg|png|ico|txt|webmanifest)$/.test(name)) return next();
    const a = asset(path.join(dir, name));
    if (!a) return next();
    return sendAsset(req, res, a, 'public, max-age=86400');
  });
  return router;
}
