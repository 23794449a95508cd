/**
 * Operator-configured proxies per country. Chromium's `--proxy-server` takes no credentials, so
 * a proxy URL with a user and password is fronted by a small local forwarder that adds the
 * `Proxy-Authorization` header (CONNECT tunnels for https, absolute-URI requests for http).
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { InvalidArgumentError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';

class AuthForwarder {
  readonly server: http.Server;
  readonly #upstream: URL;
  readonly #auth: string;
  readonly #sockets = new Set<net.Socket>();

  constructor(upstream: URL, logger: Logger) {
    this.#upstream = upstream;
    this.#auth = `Basic ${Buffer.from(`${decodeURIComponent(upstream.username)}:${decodeURIComponent(upstream.password)}`).toString('base64')}`;
    this.server = http.createServer((req, res) => this.#request(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#connect(req, socket, head));
    this.server.on('connection', (s: net.Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    this.server.on('clientError', (err, socket) => {
      logger.debug({ err }, 'proxy forwarder client error');
      socket.destroy();
    });
  }

  get #port(): number {
    return Number(this.#upstream.port) || (this.#upstream.protocol === 'https:' ? 443 : 80);
  }

  #dial(): net.Socket {
    const host = this.#upstream.hostname;
    return this.#upstream.protocol === 'https:' ? tls.connect({ host, port: this.#port, servername: host }) : net.connect({ host, port: this.#port });
  }

  #connect(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    const up = this.#dial();
    const fail = (status = 502) => {
      if (client.writable) client.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Length: 0\r\n\r\n`);
      up.destroy();
    };
    client.on('error', () => up.destroy());
    up.on('error', () => fail());
    up.once(this.#upstream.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      up.write(`CONNECT ${req.url} HTTP/1.1\r\nHost: ${req.url}\r\nProxy-Authorization: ${this.#auth}\r\n\r\n`);
    });
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) {
        if (buf.length > 16384) fail();
        return;
      }
      up.off('data', onData);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(buf.toString('latin1'))?.[1]);
      if (!(status >= 200 && status < 300)) return fail(status || 502);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const rest = buf.subarray(end + 4);
      if (rest.length) client.write(rest);
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
      up.on('close', () => client.destroy());
      client.on('close', () => up.destroy());
    };
    up.on('data', onData);
  }

  #request(req: http.IncomingMessage, res: http.ServerResponse): void {
    const lib = this.#upstream.protocol === 'https:' ? https : http;
    const out = lib.request(
      { host: this.#upstream.hostname, port: this.#port, method: req.method, path: req.url, headers: { ...req.headers, 'proxy-authorization': this.#auth } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    req.pipe(out);
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve((this.server.address() as net.AddressInfo).port));
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      for (const s of this.#sockets) s.destroy();
    });
  }
}

/** The proxy of each configured country as a `--proxy-server` value. */
export class Proxies {
  readonly #urls: Map<string, URL>;
  readonly #logger: Logger;
  readonly #forwarders = new Map<string, Promise<{ forwarder: AuthForwarder; port: number }>>();
  #stopped = false;

  constructor(urls: Map<string, URL>, logger: Logger) {
    this.#urls = urls;
    this.#logger = logger;
  }

  /** Throws INVALID_ARGUMENT naming a country with no configured proxy. */
  check(countryCode: string): void {
    if (!this.#urls.has(countryCode)) throw new InvalidArgumentError(`No proxy is configured for country ${JSON.stringify(countryCode)}`);
  }

  /** The `--proxy-server` value for a country (starting its forwarder when the proxy needs credentials). */
  async serverFor(countryCode: string): Promise<string> {
    this.check(countryCode);
    const u = this.#urls.get(countryCode)!;
    if (!u.username) return `${u.protocol}//${u.host}`;
    let f = this.#forwarders.get(countryCode);
    if (!f) {
      const forwarder = new AuthForwarder(u, this.#logger);
      f = forwarder.listen().then((port) => ({ forwarder, port }));
      f.catch(() => this.#forwarders.delete(countryCode));
      this.#forwarders.set(countryCode, f);
    }
    if (this.#stopped) throw new InvalidArgumentError('Shutting down');
    return `http://127.0.0.1:${(await f).port}`;
  }

  /** Stops every forwarder. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const all = [...this.#forwarders.values()];
    this.#forwarders.clear();
    await Promise.all(all.map((f) => f.then((x) => x.forwarder.stop(), () => {})));
  }
}
