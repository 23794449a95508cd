/**
 * The public CDP edge and the only way into a browser (Chromium has no DevTools port).
 * `ws://…/cdp/{browserId}?token=…` opens a CDP connection to that browser (what puppeteer's
 * `connect` and Playwright's `connectOverCDP` want); `/cdp/{browserId}/json/version` and
 * `/json/list` answer for it with URLs pointing back through the proxy;
 * `/cdp/{browserId}/devtools/page/{targetId}` reaches one tab. The token is signed for that one
 * browser and expires with it. Each client is a channel of its own over the pool's DevTools pipe
 * (any number may attach at once). Commands that would reach the host are refused: opening
 * `file:`, `chrome:` and other internal URLs, file paths outside the browser's own folder,
 * proxies and extensions of the client's choosing; download settings keep the browser's folder.
 *
 * Any replica's proxy serves every browser: a browser that runs on another replica is reached
 * through that replica's proxy (its owner), the connection relayed byte for byte, so one Ingress
 * serves all. The token is verified here first (no lookup, no connection to a peer for a bad one)
 * and again by the owner, whose port is the same public edge and cannot trust a header saying a
 * request was checked. A relayed request carries the owner's id, so it is never relayed again.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../../common/src/logger.js';
import type { Signer } from '../../common/src/signing.js';
import type { CdpMessage, GuardVerdict } from './cdp-connection.js';
import { verifyCdpToken } from './cdp-token.js';
import { BLOCKED_SCHEMES } from './confinement.js';
import type { LiveBrowser } from './live-browser.js';
import { FORWARDED_TO_HEADER } from './owner-routing.js';

/** Largest CDP command a client may send (bodies for Fetch.fulfillRequest, scripts). */
const MAX_MESSAGE = 64 * 1024 * 1024;
/** What a client may leave unread, or leave unsent to Chromium, before it is cut off (one client must not exhaust the pool's memory). */
const MAX_BACKLOG = 128 * 1024 * 1024;
/** Commands a client may send before its connection to the browser is up. */
const MAX_QUEUED = 1000;
/** How long a relayed connection waits for the owner's proxy to connect and answer the handshake. */
const RELAY_CONNECT_TIMEOUT_MS = 10_000;

/** Why a URL may not be opened through CDP, or undefined when it may. */
export function urlRefusal(raw: unknown): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (typeof raw !== 'string') return 'url must be a string';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'the URL does not parse';
  }
  const scheme = u.protocol.slice(0, -1).toLowerCase();
  if (['http', 'https', 'data', 'blob', 'ws', 'wss'].includes(scheme)) return undefined;
  if (scheme === 'about' && ['blank', 'srcdoc'].includes(u.pathname)) return undefined;
  if (BLOCKED_SCHEMES.includes(scheme)) return `${scheme}: URLs are blocked in this browser (no host files or internal pages)`;
  return `${scheme}: URLs are blocked in this browser (only http, https, data, blob and about:blank)`;
}

/** True when `p` names a file inside `dir` (after resolving symlinks where the file exists). */
export function insideDir(dir: string, p: unknown): boolean {
  if (typeof p !== 'string' || !path.isAbsolute(p)) return false;
  const resolved = path.resolve(p);
  if (!resolved.startsWith(dir + path.sep)) return false;
  try {
    const real = fs.realpathSync(resolved);
    return real.startsWith(fs.realpathSync(dir) + path.sep);
  } catch {
    return true; // not there: Chromium will not find it either
  }
}

const DOWNLOAD_METHODS = ['Browser.setDownloadBehavior', 'Page.setDownloadBehavior'];
const URL_PARAM: Record<string, string> = {
  'Page.navigate': 'url',
  'Target.createTarget': 'url',
  'Network.loadNetworkResource': 'url',
  'Fetch.continueRequest': 'url',
  'Fetch.continueWithAuth': 'url',
  'Network.continueInterceptedRequest': 'url',
};
/**
 * Methods no client may call: they would load code or paths of the client's choosing, or carry
 * commands past this guard (a page-side CDP binding, messages wrapped for non-flat sessions).
 */
const REFUSED_METHODS = new Set(['Target.exposeDevToolsProtocol', 'Target.sendMessageToTarget', 'Target.openDevTools', 'Browser.executeBrowserCommand', 'Page.handleFileChooser']);
const REFUSED_DOMAINS = ['Extensions.', 'PWA.'];

/** Commands whose `browserContextId` means Chromium's default context when left out. */
const CONTEXT_METHODS = new Set([
  'Target.createTarget',
  'Storage.getCookies',
  'Storage.setCookies',
  'Storage.clearCookies',
  'Browser.setDownloadBehavior',
  'Browser.grantPermissions',
  'Browser.resetPermissions',
  'Browser.setPermission',
]);

/**
 * What the proxy does with a client's command: refuses what would reach the host (internal
 * URLs, file paths outside the browser's folder, a proxy or extension of the client's choosing)
 * and points download settings at the browser's own folder.
 *
 * `contextId`: the browser context the session runs in (browser-context.ts), which clients see as
 * the default one: a command that leaves its context out gets it, `Target.getBrowserContexts`
 * does not list it (a client takes its pages for the default context's), and it cannot be disposed.
 */
export function guardCommand(msg: CdpMessage, downloadsDir: string, contextId?: string): GuardVerdict {
  const method = msg.method!;
  let params = (msg.params ?? {}) as Record<string, any>;
  if (contextId) {
    if (method === 'Target.disposeBrowserContext' && params.browserContextId === contextId) return { refuse: "Target.disposeBrowserContext: the browser's own context ends with its session" };
    if (method === 'Target.getBrowserContexts') {
      return {
        send: msg,
        result: (r: { browserContextIds?: string[] }) => ({ ...r, browserContextIds: (r.browserContextIds ?? []).filter((c) => c !== contextId), defaultBrowserContextId: contextId }),
      };
    }
    if (CONTEXT_METHODS.has(method) && params.browserContextId === undefined) {
      params = { ...params, browserContextId: contextId };
      msg = { ...msg, params };
    }
  }
  if (REFUSED_METHODS.has(method) || REFUSED_DOMAINS.some((d) => method.startsWith(d))) return { refuse: `${method} is not allowed through this proxy` };
  if ((method === 'Target.attachToTarget' || method === 'Target.setAutoAttach') && params.flatten !== true && !(method === 'Target.setAutoAttach' && params.autoAttach === false)) {
    return { refuse: `${method}: only flattened sessions (flatten: true) are supported through this proxy` };
  }
  const urlParam = URL_PARAM[method];
  if (urlParam) {
    const why = urlRefusal(params[urlParam]);
    if (why) return { refuse: why };
  }
  if (method === 'DOM.setFileInputFiles' || method === 'Input.dispatchDragEvent') {
    const files: unknown[] = method === 'DOM.setFileInputFiles' ? params.files ?? [] : params.data?.files ?? [];
    if (!Array.isArray(files) || !files.every((f) => insideDir(downloadsDir, f))) {
      // The folder is a host path: the message does not name it.
      return { refuse: `${method}: only files in the browser's downloads folder may be set` };
    }
  }
  if (method === 'Target.createBrowserContext' && ('proxyServer' in params || 'proxyBypassList' in params || 'proxyBypassRules' in params)) {
    return { refuse: 'Target.createBrowserContext: the browser network (proxy) is set by the pool' };
  }
  if (DOWNLOAD_METHODS.includes(method) && params.behavior !== 'deny' && params.behavior !== 'default') {
    const behavior = params.behavior === 'allowAndName' ? 'allowAndName' : 'allow';
    return { send: { ...msg, params: { ...params, behavior, downloadPath: downloadsDir } } };
  }
  return { send: msg };
}

/** What the proxy needs from the pool. */
export interface CdpProxyBackend {
  /** The browser when it is active in this process (not stopped, not stopping). */
  live(browserId: string): LiveBrowser | undefined;
  /** Its public cdpUrl (with a token). */
  publicUrl(browser: LiveBrowser): string;
  /**
   * The replica that runs a browser not live here (its id and the ws:// base of its proxy);
   * undefined when there is none to relay to. `forwardedTo`: the instance a relayed request was
   * meant for (a relayed request is never relayed again). Unset: browsers of this process only.
   */
  owner?(browserId: string, forwardedTo: string | undefined): Promise<{ id: string; cdpUrl: string } | undefined>;
  /** A relay to an owner failed or was cut: the backend judges whether the owner's process is gone. */
  ownerUnreachable?(ownerId: string): void;
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
  /** Seconds after which the same request may succeed (a `Retry-After` header). */
  readonly retryAfter: number | undefined;
  constructor(status: number, message: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/**
 * The owner of a browser does not answer its relay: it may be restarting (its browsers outlive it
 * and its next process takes them over) or dead (the next call finds it reaped and answers 404).
 * Either way the client may try again: 503 with a Retry-After, not a 502.
 */
const ownerSilent = () => new Refusal(503, "The browser's pool replica is not answering (it may be restarting); try again shortly", 1);

/** Writes an HTTP error on a raw socket (an upgrade we refuse) and closes it. */
function refuseSocket(socket: net.Socket, r: Refusal): void {
  const body = JSON.stringify({ detail: r.message });
  const retry = r.retryAfter === undefined ? '' : `Retry-After: ${r.retryAfter}\r\n`;
  socket.end(
    `HTTP/1.1 ${r.status} ${http.STATUS_CODES[r.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retry}Connection: close\r\n\r\n${body}`,
  );
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, retryAfter?: number): void {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=UTF-8',
    'Content-Length': Buffer.byteLength(json),
    'Cache-Control': 'no-store',
    ...(retryAfter === undefined ? {} : { 'Retry-After': String(retryAfter) }),
  });
  res.end(json);
}

/** `/json/version` as Chromium's own DevTools HTTP endpoint answers it, from CDP. */
async function versionOf(browser: LiveBrowser): Promise<Record<string, string>> {
  const v = await browser.chromium.conn.send<{ protocolVersion: string; product: string; userAgent: string; jsVersion: string; revision: string }>('Browser.getVersion', {}, undefined, 5000);
  return { Browser: v.product, 'Protocol-Version': v.protocolVersion, 'User-Agent': v.userAgent, 'V8-Version': v.jsVersion, 'WebKit-Version': v.revision };
}

/** The CDP proxy's HTTP server (does not listen until `listen`). */
export class CdpProxy {
  readonly server: http.Server;
  readonly #o: CdpProxyOptions;
  readonly #clients = new Set<WebSocket>();
  /** Connections relayed to other replicas' proxies. */
  readonly #relays = new Set<net.Socket>();
  readonly #wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_MESSAGE });
  #stopping: Promise<void> | undefined;

  constructor(o: CdpProxyOptions) {
    this.#o = o;
    this.server = http.createServer((req, res) => {
      this.#http(req, res).catch((err) => {
        if (res.headersSent) return void res.destroy(); // a relayed answer broke off midway: nothing more can be said
        if (err instanceof Refusal) return sendJson(res, err.status, { detail: err.message }, err.retryAfter);
        this.#o.logger.warn({ err }, 'cdp proxy request failed');
        return sendJson(res, 502, { detail: 'The browser did not answer' });
      });
    });
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#upgrade(req, socket, head));
  }

  /**
   * Checks route and token, then finds the browser: live here, or the owner to relay to; throws a
   * Refusal otherwise.
   */
  async #authorize(req: http.IncomingMessage): Promise<({ route: Route; browser: LiveBrowser; owner?: undefined } | { route: Route; browser?: undefined; owner: { id: string; cdpUrl: string } }) & { url: URL }> {
    // Only a path (origin-form): `//host/…` or `/\host/…` would parse as another host, and the
    // relay below would connect there.
    if (!/^\/(?![/\\])/.test(req.url ?? '')) throw new Refusal(404, 'Not found');
    const url = new URL(req.url!, 'http://proxy');
    const r = route(url.pathname);
    if (!r) throw new Refusal(404, 'Not found');
    const verdict = verifyCdpToken(this.#o.signer, r.browserId, tokenOf(req, url));
    if (verdict === 'expired') throw new Refusal(401, 'CDP token expired');
    if (verdict !== 'ok') throw new Refusal(401, 'Invalid CDP token');
    const browser = this.#o.backend.live(r.browserId);
    if (browser) return { route: r, browser, url };
    const to = req.headers[FORWARDED_TO_HEADER];
    let owner: { id: string; cdpUrl: string } | undefined;
    try {
      owner = await this.#o.backend.owner?.(r.browserId, typeof to === 'string' ? to : undefined);
    } catch (err) {
      this.#o.logger.debug({ err, browserId: r.browserId }, 'cdp owner not found');
      throw new Refusal(503, 'The browser is not reachable right now; try again', 1);
    }
    if (!owner) throw new Refusal(404, 'Browser is not active');
    return { route: r, owner, url };
  }

  async #http(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new Refusal(405, 'Method not allowed');
    const { route: r, browser, owner, url } = await this.#authorize(req);
    if (owner) return this.#relayHttp(req, res, url, owner);
    browser.touch();
    const publicUrl = this.#o.backend.publicUrl(browser);
    if (r.kind === 'browser' || r.kind === 'page') throw new Refusal(426, 'WebSocket upgrade required');
    if (r.kind === 'version') return sendJson(res, 200, { ...(await versionOf(browser)), webSocketDebuggerUrl: publicUrl });
    const { targetInfos } = await browser.chromium.conn.send<{ targetInfos: { targetId: string; type: string; title: string; url: string }[] }>('Target.getTargets', {}, undefined, 5000);
    const [base, query] = publicUrl.split('?');
    const visible = targetInfos.filter((t) => (t.type === 'page' && browser.tabs.has(t.targetId)) || ['iframe', 'worker', 'service_worker', 'shared_worker'].includes(t.type));
    return sendJson(
      res,
      200,
      visible.map((t) => ({ description: '', id: t.targetId, title: t.title, type: t.type, url: t.url, webSocketDebuggerUrl: `${base}/devtools/page/${t.targetId}?${query}` })),
    );
  }

  #upgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    this.#authorize(req).then(
      (auth) => {
        if (auth.route.kind !== 'browser' && auth.route.kind !== 'page') throw new Refusal(400, 'Not a WebSocket endpoint');
        if (socket.destroyed) return;
        if (auth.owner) return this.#relayUpgrade(req, socket, head, auth.url, auth.owner);
        const { route: r, browser } = auth;
        this.#wss.handleUpgrade(req, socket, head, (client) => this.#attach(client, browser, r.targetId));
      },
    ).catch((err: unknown) => {
      const r = err instanceof Refusal ? err : new Refusal(500, 'Internal error');
      if (!(err instanceof Refusal)) this.#o.logger.warn({ err }, 'cdp connection failed');
      this.#o.logger.debug({ status: r.status, reason: r.message }, 'cdp connection refused');
      refuseSocket(socket, r);
    });
  }

  /** The request's head as the owner's proxy gets it: the same path and headers, Host its own, marked as relayed to it. */
  #relayedHeaders(req: http.IncomingMessage, target: URL, ownerId: string): [string, string][] {
    const out: [string, string][] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      if (!['host', FORWARDED_TO_HEADER].includes(name.toLowerCase())) out.push([name, req.rawHeaders[i + 1]!]);
    }
    out.push(['Host', target.host], [FORWARDED_TO_HEADER, ownerId]);
    return out;
  }

  /**
   * Where on the owner a request goes: its proxy's host and base path, then the checked path and
   * query (the token) of this request. The host comes from the owner's record only.
   */
  static #target(url: URL, cdpUrl: string): URL {
    const base = new URL(cdpUrl);
    const target = new URL(`${base.protocol === 'wss:' || base.protocol === 'https:' ? 'https' : 'http'}://${base.host}`);
    target.pathname = base.pathname.replace(/\/+$/, '') + url.pathname;
    target.search = url.search;
    return target;
  }

  /**
   * Relays a WebSocket upgrade to the owner's proxy and then the connection byte for byte: the
   * owner answers the handshake (or refuses it) itself, and frames pass unparsed.
   */
  #relayUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer, url: URL, owner: { id: string; cdpUrl: string }): void {
    const target = CdpProxy.#target(url, owner.cdpUrl);
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    const upstream = target.protocol === 'https:' ? tls.connect({ host: target.hostname, port, servername: target.hostname }) : net.connect({ host: target.hostname, port });
    let answered = false;
    // An owner whose node went silent (no RST) or that never answers: refused, not waited on for minutes.
    upstream.setTimeout(RELAY_CONNECT_TIMEOUT_MS, () => upstream.destroy(new Error('the owner did not answer in time')));
    this.#relays.add(upstream);
    upstream.once('close', (hadError) => {
      this.#relays.delete(upstream);
      // Refused, or cut from the owner's side: maybe its process died (then the browser is recorded stopped at once).
      if (hadError || !socket.destroyed) this.#o.backend.ownerUnreachable?.(owner.id);
      if (answered) socket.destroy();
      else if (!socket.destroyed) refuseSocket(socket, ownerSilent());
    });
    socket.once('close', () => upstream.destroy());
    upstream.on('error', (err) => {
      if (!answered) this.#o.logger.warn({ err, instanceId: owner.id }, "the owner's cdp proxy did not answer");
    });
    upstream.once(target.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      socket.setNoDelay(true);
      upstream.setNoDelay(true);
      const lines = this.#relayedHeaders(req, target, owner.id).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      upstream.write(`${req.method} ${target.pathname}${target.search} HTTP/1.1\r\n${lines}\r\n`);
      if (head.length) upstream.write(head);
      upstream.once('data', () => {
        answered = true;
        upstream.setTimeout(0); // the handshake is answered: an idle CDP connection is fine
      });
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
  }

  /** Relays a `/json/*` request to the owner's proxy and its answer back. */
  #relayHttp(req: http.IncomingMessage, res: http.ServerResponse, url: URL, owner: { id: string; cdpUrl: string }): Promise<void> {
    const target = CdpProxy.#target(url, owner.cdpUrl);
    const headers = Object.fromEntries(this.#relayedHeaders(req, target, owner.id));
    return new Promise<void>((resolve, reject) => {
      const out = (target.protocol === 'https:' ? https : http).request(target, { method: req.method, headers, timeout: 10000 }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.once('end', () => resolve());
        answer.once('error', reject);
      });
      out.once('timeout', () => out.destroy(new Error('the owner did not answer in time')));
      out.once('error', (err) => {
        this.#o.backend.ownerUnreachable?.(owner.id);
        this.#o.logger.warn({ err, instanceId: owner.id }, "the owner's cdp proxy did not answer");
        reject(ownerSilent());
      });
      res.once('close', () => out.destroy()); // the client went away: so does the request to the owner
      out.end();
    });
  }

  /** Makes the client a channel of its own over the browser's pipe; messages that arrive meanwhile wait. */
  #attach(client: WebSocket, browser: LiveBrowser, targetId: string | undefined): void {
    const queued: string[] = [];
    let channel: import('./cdp-connection.js').CdpChannel | undefined;
    browser.addClient(client);
    this.#clients.add(client);
    client.on('message', (data: Buffer, isBinary: boolean) => {
      browser.touch();
      if (isBinary) return client.close(1003, 'CDP messages are text');
      const text = data.toString('utf8');
      if (channel) {
        channel.send(text);
        if (browser.chromium.conn.backlog > MAX_BACKLOG) client.close(1008, 'Too many commands in flight');
      } else if (queued.push(text) > MAX_QUEUED) client.close(1008, 'Too many commands before the browser answered');
    });
    client.on('close', () => {
      this.#clients.delete(client);
      channel?.close();
    });
    client.on('error', () => client.terminate());
    const deliver = (text: string) => {
      if (client.readyState !== WebSocket.OPEN) return;
      if (client.bufferedAmount > MAX_BACKLOG) return client.terminate(); // it stopped reading
      client.send(text);
    };
    browser.chromium.conn.openChannel(targetId, deliver, (msg) => guardCommand(msg, browser.chromium.downloadsDir, browser.contextId)).then(
      (c) => {
        channel = c;
        c.onClose(() => client.close(1001, 'The browser target closed'));
        if (c.isClosed || client.readyState !== WebSocket.OPEN) return client.readyState === WebSocket.OPEN ? client.close(1011, 'The browser is gone') : c.close();
        for (const m of queued.splice(0)) c.send(m);
        this.#o.logger.debug({ browserId: browser.id, clients: browser.clientCount }, 'cdp client attached');
      },
      (err) => {
        this.#o.logger.debug({ err, browserId: browser.id }, 'cdp client not attached');
        client.close(1011, targetId ? 'No such target' : 'The browser did not answer');
      },
    );
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
      for (const r of this.#relays) r.destroy();
      this.server.closeAllConnections();
      this.#wss.close();
    });
    return this.#stopping;
  }
}
