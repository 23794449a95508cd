/**
 * The public CDP edge. `ws://…/cdp/{browserId}?token=…` upgrades to that browser's DevTools
 * WebSocket (what puppeteer's `connect` and Playwright's `connectOverCDP` want);
 * `/cdp/{browserId}/json/version` and `/json/list` answer for it with URLs pointing back
 * through the proxy; `/cdp/{browserId}/devtools/page/{targetId}` reaches one tab. The token is
 * signed for that one browser and expires with it. Messages are relayed as they are (any number
 * of clients may attach at once), except that download settings keep the browser's own folder.
 */
import http from 'node:http';
import net from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../../common/src/logger.js';
import type { Signer } from '../../common/src/signing.js';
import { verifyCdpToken } from './cdp-token.js';
import type { LiveBrowser } from './live-browser.js';

/** Largest CDP message relayed (screenshots and DOM snapshots can be large). */
const MAX_MESSAGE = 256 * 1024 * 1024;

const DOWNLOAD_METHODS = ['Browser.setDownloadBehavior', 'Page.setDownloadBehavior'];

/**
 * A client may point downloads anywhere (Playwright points them at a folder on its own machine);
 * the browser's downloads belong in its own folder, where the pool lists and stores them.
 */
export function keepDownloadsHere(data: Buffer, downloadsDir: string): Buffer {
  if (data.indexOf('etDownloadBehavior') === -1) return data;
  let msg: { method?: string; params?: { behavior?: string; downloadPath?: string } };
  try {
    msg = JSON.parse(data.toString('utf8'));
  } catch {
    return data;
  }
  if (!msg.method || !DOWNLOAD_METHODS.includes(msg.method) || !msg.params || msg.params.behavior === 'deny') return data;
  const behavior = msg.params.behavior === 'allowAndName' ? 'allowAndName' : 'allow';
  return Buffer.from(JSON.stringify({ ...msg, params: { ...msg.params, behavior, downloadPath: downloadsDir } }));
}

/** What the proxy needs from the pool. */
export interface CdpProxyBackend {
  /** The browser when it is active in this process (not stopped, not stopping). */
  live(browserId: string): LiveBrowser | undefined;
  /** Its public cdpUrl (with a token). */
  publicUrl(browser: LiveBrowser): string;
}

export interface CdpProxyOptions {
  backend: CdpProxyBackend;
  signer: Signer;
  logger: Logger;
}

interface Route {
  browserId: string;
  kind: 'browser' | 'page' | 'version' | 'list';
  targetId?: string;
}

const ID = '([A-Za-z0-9_-]{1,100})';
const ROUTES: [RegExp, Route['kind']][] = [
  [new RegExp(`^/cdp/${ID}/?$`), 'browser'],
  [new RegExp(`^/cdp/${ID}/devtools/browser(?:/[A-Za-z0-9-]+)?/?$`), 'browser'],
  [new RegExp(`^/cdp/${ID}/devtools/page/([A-Za-z0-9]{1,64})/?$`), 'page'],
  [new RegExp(`^/cdp/${ID}/json/version/?$`), 'version'],
  [new RegExp(`^/cdp/${ID}/json(?:/list)?/?$`), 'list'],
];

function route(pathname: string): Route | undefined {
  for (const [re, kind] of ROUTES) {
    const m = re.exec(pathname);
    if (m) return { browserId: m[1]!, kind, ...(m[2] ? { targetId: m[2] } : {}) };
  }
  return undefined;
}

function tokenOf(req: http.IncomingMessage, url: URL): string | null {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7).trim();
  return url.searchParams.get('token');
}

class Refusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Writes an HTTP error on a raw socket (an upgrade we refuse) and closes it. */
function refuseSocket(socket: net.Socket, status: number, detail: string): void {
  const body = JSON.stringify({ detail });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8', 'Content-Length': Buffer.byteLength(json), 'Cache-Control': 'no-store' });
  res.end(json);
}

/** GET on Chromium's own DevTools HTTP endpoint; its Host check wants a local name. */
function upstreamJson(port: number, path: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { Host: `127.0.0.1:${port}` }, timeout: 5000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        try {
          resolve(JSON.parse(text));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('DevTools endpoint timed out')));
    req.on('error', reject);
  });
}

/** The CDP proxy's HTTP server (does not listen until `listen`). */
export class CdpProxy {
  readonly server: http.Server;
  readonly #o: CdpProxyOptions;
  readonly #clients = new Set<WebSocket>();
  readonly #wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_MESSAGE });
  #stopping: Promise<void> | undefined;

  constructor(o: CdpProxyOptions) {
    this.#o = o;
    this.server = http.createServer((req, res) => {
      this.#http(req, res).catch((err) => {
        if (err instanceof Refusal) return sendJson(res, err.status, { detail: err.message });
        this.#o.logger.warn({ err }, 'cdp proxy request failed');
        return sendJson(res, 502, { detail: 'The browser did not answer' });
      });
    });
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#upgrade(req, socket, head));
  }

  /** Checks route, token and browser; throws a Refusal otherwise. */
  #authorize(req: http.IncomingMessage): { route: Route; url: URL; browser: LiveBrowser } {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const r = route(url.pathname);
    if (!r) throw new Refusal(404, 'Not found');
    const verdict = verifyCdpToken(this.#o.signer, r.browserId, tokenOf(req, url));
    if (verdict === 'expired') throw new Refusal(401, 'CDP token expired');
    if (verdict !== 'ok') throw new Refusal(401, 'Invalid CDP token');
    const browser = this.#o.backend.live(r.browserId);
    if (!browser) throw new Refusal(404, 'Browser is not active');
    return { route: r, url, browser };
  }

  async #http(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new Refusal(405, 'Method not allowed');
    const { route: r, browser } = this.#authorize(req);
    browser.touch();
    const publicUrl = this.#o.backend.publicUrl(browser);
    if (r.kind === 'browser' || r.kind === 'page') throw new Refusal(426, 'WebSocket upgrade required');
    if (r.kind === 'version') {
      const v = await upstreamJson(browser.chromium.port, '/json/version');
      return sendJson(res, 200, { ...v, webSocketDebuggerUrl: publicUrl });
    }
    const targets = (await upstreamJson(browser.chromium.port, '/json/list')) as { id: string; type: string; url: string }[];
    const [base, query] = publicUrl.split('?');
    const visible = targets.filter((t) => t.type !== 'page' || browser.tabs.has(t.id));
    return sendJson(
      res,
      200,
      visible.map(({ devtoolsFrontendUrl: _f, webSocketDebuggerUrl: _w, ...t }: any) => ({ ...t, webSocketDebuggerUrl: `${base}/devtools/page/${t.id}?${query}` })),
    );
  }

  #upgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    let auth: { route: Route; browser: LiveBrowser };
    try {
      auth = this.#authorize(req);
      if (auth.route.kind !== 'browser' && auth.route.kind !== 'page') throw new Refusal(400, 'Not a WebSocket endpoint');
    } catch (err) {
      const r = err instanceof Refusal ? err : new Refusal(500, 'Internal error');
      this.#o.logger.debug({ status: r.status, reason: r.message }, 'cdp connection refused');
      return refuseSocket(socket, r.status, r.message);
    }
    const { route: r, browser } = auth;
    const chromium = browser.chromium;
    const upstreamPath = r.kind === 'page' ? `/devtools/page/${r.targetId}` : new URL(chromium.wsUrl).pathname;
    this.#wss.handleUpgrade(req, socket, head, (client) => this.#relay(client, `ws://127.0.0.1:${chromium.port}${upstreamPath}`, browser));
  }

  /** Relays messages both ways; a client's download settings are pointed at the browser's own folder. */
  #relay(client: WebSocket, upstreamUrl: string, browser: LiveBrowser): void {
    const upstream = new WebSocket(upstreamUrl, { perMessageDeflate: false, maxPayload: MAX_MESSAGE });
    const queued: [Buffer, boolean][] = [];
    browser.addClient(client);
    this.#clients.add(client);
    client.on('message', (data: Buffer, isBinary: boolean) => {
      browser.touch();
      const out = isBinary ? data : keepDownloadsHere(data, browser.chromium.downloadsDir);
      if (upstream.readyState === WebSocket.OPEN) upstream.send(out, { binary: isBinary });
      else queued.push([out, isBinary]);
    });
    upstream.on('open', () => {
      for (const [m, binary] of queued.splice(0)) upstream.send(m, { binary });
    });
    upstream.on('message', (data: Buffer, isBinary: boolean) => {
      if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
    });
    upstream.on('close', () => client.close());
    client.on('close', () => {
      this.#clients.delete(client);
      if (upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
      else upstream.close();
    });
    upstream.on('error', () => client.terminate());
    client.on('error', () => upstream.terminate());
    this.#o.logger.debug({ browserId: browser.id, clients: browser.clientCount }, 'cdp client attached');
  }

  /** Binds; resolves to the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  /** Stops accepting and cuts every connection (the browsers behind them are stopping too). Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= new Promise<void>((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      for (const c of this.#clients) c.terminate();
      this.server.closeAllConnections();
      this.#wss.close();
    });
    return this.#stopping;
  }
}
