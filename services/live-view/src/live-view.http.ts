/**
 * The live view edge: `GET /browsers/{id}?token=…` serves the page, `GET /browsers/{id}/ws` is
 * its WebSocket, `/live-view/assets/*` its script and stylesheet. The token is checked on both;
 * an invalid or expired one gets the page's error state and never a frame. The page may be
 * embedded anywhere `frame-ancestors` allows (no X-Frame-Options).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from '../../common/src/logger.js';
import { redactUrl } from '../../common/src/logger.js';
import type { Signer } from '../../common/src/signing.js';
import { verifyLiveViewToken, type TokenVerdict } from './live-view-token.js';
import { renderTemplate, type PageAssets } from './page-assets.js';
import type { FrameSource } from './pool-client.js';
import { ViewerConnection } from './viewer-connection.js';
import { TooManyViewersError, type ViewerHub } from './viewer-hub.js';
import { CloseCode } from './viewer-protocol.js';

export interface LiveViewHttpDeps {
  signer: Signer;
  hub: ViewerHub;
  source: FrameSource;
  assets: PageAssets;
  logger: Logger;
  /** CSP frame-ancestors source list. */
  frameAncestors: string;
  maxUnacked: number;
  maxFps: number;
  /** WebSocket keepalive; a viewer that misses two pings is dropped. */
  pingIntervalMs?: number;
}

export interface LiveViewHttp {
  readonly server: http.Server;
  /** Open viewer connections. */
  readonly viewers: ReadonlySet<ViewerConnection>;
  /** Closes every viewer (going away) and the server. Idempotent. */
  stop(): Promise<void>;
}

const BROWSER_ID = '[A-Za-z0-9_-]{1,64}';
const PAGE = new RegExp(`^/browsers/(${BROWSER_ID})/?$`);
const SOCKET = new RegExp(`^/browsers/(${BROWSER_ID})/ws$`);

function pageHeaders(frameAncestors: string, host: string | undefined): http.OutgoingHttpHeaders {
  // 'self' covers ws(s) of the same host in current browsers; the explicit ones are for older ones.
  const safeHost = host && /^[A-Za-z0-9.\-:[\]]{1,255}$/.test(host) ? ` ws://${host} wss://${host}` : '';
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data: blob:",
      `connect-src 'self'${safeHost}`,
      "base-uri 'none'",
      "form-action 'none'",
      `frame-ancestors ${frameAncestors}`,
    ].join('; '),
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  };
}

function sendText(res: http.ServerResponse, status: number, body: string, type = 'application/json'): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}

/** What a refused link says before any script runs (the script shows the same, with detail). */
const REFUSED_MESSAGES: Record<string, string> = { expired: 'This live view link has expired', invalid: 'This live view link is not valid' };

function initialState(verdict: TokenVerdict | undefined): string {
  if (!verdict) return 'invalid';
  return verdict.ok ? 'connecting' : verdict.reason;
}

export function createLiveViewHttp(deps: LiveViewHttpDeps): LiveViewHttp {
  const viewers = new Set<ViewerConnection>();
  const alive = new WeakMap<WebSocket, boolean>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false });
  const { assets } = deps;

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://live-view');
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(res, 405, JSON.stringify({ detail: 'Method not allowed' }));
    if (url.pathname === '/healthz') return sendText(res, 200, JSON.stringify({ status: 'ok' }));
    if (url.pathname === '/live-view/assets/live-view.js' || url.pathname === '/live-view/assets/live-view.css') {
      const js = url.pathname.endsWith('.js');
      const body = js ? assets.script : assets.style;
      res.writeHead(200, {
        'Content-Type': js ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
        'Content-Length': body.length,
        'Cache-Control': 'public, max-age=86400, immutable',
        'X-Content-Type-Options': 'nosniff',
      });
      return res.end(req.method === 'HEAD' ? undefined : body);
    }
    const page = PAGE.exec(url.pathname);
    if (!page) return sendText(res, 404, JSON.stringify({ detail: 'Not found' }));
    const browserId = page[1]!;
    const token = url.searchParams.get('token');
    const verdict = token ? verifyLiveViewToken(deps.signer, browserId, token) : undefined;
    const state = initialState(verdict);
    const html = renderTemplate(assets.template, {
      theme: url.searchParams.get('theme') === 'light' ? 'light' : 'dark',
      ui: url.searchParams.get('ui') === 'false' ? 'false' : 'true',
      mode: verdict?.ok ? verdict.mode : 'view',
      browserId,
      state,
      message: REFUSED_MESSAGES[state] ?? '',
      version: assets.version,
    });
    res.writeHead(verdict?.ok ? 200 : 403, { ...pageHeaders(deps.frameAncestors, req.headers.host), 'Content-Length': Buffer.byteLength(html) });
    res.end(req.method === 'HEAD' ? undefined : html);
  });

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://live-view');
    const m = SOCKET.exec(url.pathname);
    if (!m) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => onViewer(ws, m[1]!, url.searchParams.get('token') ?? '', req));
  });

  function onViewer(ws: WebSocket, browserId: string, token: string, req: http.IncomingMessage): void {
    const verdict = verifyLiveViewToken(deps.signer, browserId, token);
    if (!verdict.ok) {
      // Accepted only to say why in a way the page can read; no feed is opened.
      deps.logger.info({ browserId, reason: verdict.reason, path: redactUrl(req.url ?? '') }, 'live view refused');
      ws.close(verdict.reason === 'expired' ? CloseCode.tokenExpired : CloseCode.tokenInvalid, verdict.reason === 'expired' ? 'Link expired' : 'Invalid link');
      return;
    }
    const conn = new ViewerConnection({ ws, grant: verdict, browserId, source: deps.source, logger: deps.logger, maxUnacked: deps.maxUnacked, maxFps: deps.maxFps });
    let leave: () => void;
    try {
      leave = deps.hub.join(verdict.projectId, browserId, conn);
    } catch (err) {
      if (!(err instanceof TooManyViewersError)) deps.logger.error({ err, browserId }, 'viewer not added');
      conn.close(err instanceof TooManyViewersError ? CloseCode.tooManyViewers : CloseCode.unavailable, err instanceof TooManyViewersError ? 'Too many viewers' : 'Unavailable');
      return;
    }
    viewers.add(conn);
    alive.set(ws, true);
    ws.on('pong', () => alive.set(ws, true));
    ws.once('close', () => {
      viewers.delete(conn);
      leave();
    });
    deps.logger.debug({ browserId, mode: verdict.mode, viewers: viewers.size }, 'viewer joined');
  }

  const ping = setInterval(() => {
    for (const ws of wss.clients) {
      if (alive.get(ws) === false) {
        ws.terminate();
        continue;
      }
      alive.set(ws, false);
      ws.ping();
    }
  }, deps.pingIntervalMs ?? 30000);
  ping.unref();

  let stopping: Promise<void> | undefined;
  return {
    server,
    viewers,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        clearInterval(ping);
        for (const v of viewers) v.close(CloseCode.goingAway, 'Server shutting down');
        wss.close();
        server.close(() => resolve());
        server.closeIdleConnections();
        // Give the close frames a moment, then cut whatever is left.
        setTimeout(() => {
          for (const ws of wss.clients) ws.terminate();
          server.closeAllConnections();
        }, 500).unref();
      });
      return stopping;
    },
  };
}
