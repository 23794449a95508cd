/**
 * Test support: serves test/fixtures/site over HTTP on 127.0.0.1, with the few dynamic routes the
 * pages need (a login that sets an HttpOnly cookie, "who am I", a file sent as an attachment).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** test/fixtures/site */
export const SITE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../test/fixtures/site');

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.csv': 'text/csv', '.js': 'text/javascript', '.json': 'application/json' };

export interface FixtureSite {
  /** http://127.0.0.1:<port> */
  origin: string;
  /** Every request served, as `host path` (the Host header, e.g. ad.doubleclick.net:1234, and the path). */
  requests: string[];
  close(): Promise<void>;
}

function cookie(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return undefined;
}

/** Serves the fixture site on a free port of 127.0.0.1. */
/** A 1×1 transparent GIF (the ad and tracker pixels of ads.html). */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

export async function startFixtureSite(): Promise<FixtureSite> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    requests.push(`${req.headers.host ?? ''} ${url.pathname}`);
    if (url.pathname.endsWith('/pixel.gif')) {
      res.writeHead(200, { 'Content-Type': 'image/gif', 'Cache-Control': 'no-store', 'Content-Length': PIXEL.length });
      res.end(PIXEL);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/api/login') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        res.writeHead(200, { 'Set-Cookie': `session=${encodeURIComponent(body)}; Path=/; HttpOnly; Max-Age=3600`, 'Content-Type': 'text/plain' });
        res.end('ok');
      });
      return;
    }
    if (url.pathname === '/api/headers') {
      // What the browser sent (the Accept-Language and client hints a page's scripts must agree with).
      res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      res.end(JSON.stringify(req.headers));
      return;
    }
    if (url.pathname === '/api/me') {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store' });
      res.end(cookie(req, 'session') ?? 'nobody');
      return;
    }
    const attachment = url.pathname.startsWith('/files/');
    const name = path.basename(attachment ? url.pathname.slice('/files/'.length) : url.pathname === '/' ? 'index.html' : url.pathname);
    const file = path.join(SITE_DIR, name);
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('not found');
        return;
      }
      const headers: http.OutgoingHttpHeaders = { 'Content-Type': TYPES[path.extname(name)] ?? 'application/octet-stream', 'Cache-Control': 'no-store' };
      if (attachment) headers['Content-Disposition'] = `attachment; filename="${name}"`;
      res.writeHead(200, headers);
      res.end(data);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
