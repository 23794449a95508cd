/**
 * The only way out of a browser: each Chromium is launched with `--proxy-server` pointing at its own
 * EgressProxy (and `--proxy-bypass-list=<-loopback>` so loopback goes through it too). Pages are
 * untrusted, so every destination is checked here — after resolving names ourselves and then
 * connecting to exactly the address that was checked (no DNS rebinding) — before a byte leaves.
 * When the browser has a per-country upstream proxy, the tunnel is chained through it with the
 * credentials Chromium's `--proxy-server` cannot carry.
 */
import dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { InvalidArgumentError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import { requestType, type RequestType } from './adblock.js';
import { EGRESS_FAILURE_HEADER } from './client/egress.js';

/** What a browser may reach. */
export interface EgressPolicy {
  /** Loopback, RFC 1918, CGNAT 100.64/10, IPv6 ULA fc00::/7 and this host's own addresses allowed (local development) or refused (production). */
  allowPrivateNetworks: boolean;
  /** Ports refused on loopback and on this host's own interface addresses even when private networks are allowed (the services' internal ports). */
  /** Asked per request, so it may be a live view (the pool's adds every egress proxy's own port): a set built once, never per request. */
  deniedLocalPorts: Pick<ReadonlySet<number>, 'has'>;
  /** Extra host:port endpoints always refused (e.g. a remote Postgres from DATABASE_URL). Names are resolved by the proxy. */
  deniedEndpoints?: { host: string; port: number }[];
}

/** Decides on ad and tracker requests (adblock.ts): the rule that blocks `url`, or undefined. */
export interface RequestBlocker {
  blocking(url: string, sourceUrl?: string, type?: RequestType): string | undefined;
}

/** Resolves a name to every address it has (dns.lookup with `all: true`); injectable for tests. */
export type LookupAll = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** Options of {@link EgressProxy.start}. */
export interface EgressProxyOptions {
  policy: EgressPolicy;
  logger: Logger;
  /** The upstream proxy to chain through (http, https, socks4, socks5); undefined = direct. */
  upstream?: URL | undefined;
  /** Name resolution; default dns.lookup(all). */
  lookup?: LookupAll;
  /** How long a connection to a destination or upstream may take; default 30 s. */
  connectTimeoutMs?: number;
  /** How long a name's addresses are reused (default DNS_CACHE_MS; 0: looked up every time). */
  dnsCacheMs?: number;
}

/**
 * How long a looked-up name's addresses are reused. `dns.lookup` (which honours /etc/hosts, as
 * Chromium would) reports no TTL, so a span shorter than any sensible record's TTL: a page's
 * dozens of requests to one host cost one lookup, and a name still moves within seconds.
 */
export const DNS_CACHE_MS = 10_000;
/** Names remembered at most (per cache); the oldest go first. */
const DNS_CACHE_NAMES = 1000;

/** `lookup` with its answers reused for `ttlMs` (failures are not kept; concurrent asks share one lookup). */
export function cachedLookup(lookup: LookupAll, ttlMs: number, now: () => number = Date.now): LookupAll {
  if (ttlMs <= 0) return lookup;
  const cache = new Map<string, { at: number; addresses: ReturnType<LookupAll> }>();
  return (host) => {
    const hit = cache.get(host);
    if (hit && now() - hit.at < ttlMs) return hit.addresses;
    const addresses = lookup(host);
    cache.delete(host);
    cache.set(host, { at: now(), addresses });
    if (cache.size > DNS_CACHE_NAMES) cache.delete(cache.keys().next().value!);
    addresses.catch(() => cache.get(host)?.addresses === addresses && cache.delete(host));
    return addresses;
  };
}

const dnsLookup: LookupAll = (h) => dns.promises.lookup(h, { all: true, verbatim: true });
/** The system's resolver, cached for every browser of this process alike. */
const systemLookup = cachedLookup(dnsLookup, DNS_CACHE_MS);

const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal', 'metadata.azure.internal']);
const MAX_HEAD = 16 * 1024;
const ALLOWED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings']);

// ---- addresses (pure) ----

type Scope = 'refused' | 'loopback' | 'private' | 'public';
interface Class {
  scope: Scope;
  reason: string;
  /** The canonical form compared with this host's own addresses (an embedded IPv4 as dotted quad). */
  canonical: string;
}

const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const v4number = (s: string) => s.split('.').reduce((n, p) => n * 256 + Number(p), 0);
const inV4 = (n: number, base: string, bits: number) => bits === 0 || n >>> (32 - bits) === v4number(base) >>> (32 - bits);

function classifyV4(n: number, prefix = ''): Class {
  const canonical = dotted(n);
  const c = (scope: Scope, reason: string): Class => ({ scope, reason: prefix + reason, canonical });
  if (inV4(n, '0.0.0.0', 8)) return c('refused', 'unspecified address');
  if (inV4(n, '169.254.0.0', 16)) return c('refused', 'link-local address (cloud metadata)');
  if (n === v4number('100.100.100.200')) return c('refused', 'cloud metadata address');
  if (n === 0xffffffff) return c('refused', 'broadcast address');
  if (inV4(n, '224.0.0.0', 4)) return c('refused', 'multicast address');
  if (inV4(n, '240.0.0.0', 4)) return c('refused', 'reserved address');
  if (inV4(n, '127.0.0.0', 8)) return c('loopback', 'loopback address');
  if (inV4(n, '10.0.0.0', 8) || inV4(n, '172.16.0.0', 12) || inV4(n, '192.168.0.0', 16) || inV4(n, '100.64.0.0', 10)) return c('private', 'private network address');
  return c('public', '');
}

/** The eight 16-bit groups of a valid IPv6 literal (without zone). */
function v6groups(s: string): number[] {
  const last = s.lastIndexOf(':');
  if (s.includes('.', last)) {
    const n = v4number(s.slice(last + 1));
    s = `${s.slice(0, last + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const h = parse(head);
  const t = parse(tail);
  return tail === undefined ? h : [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
}

function classifyV6(s: string): Class {
  const g = v6groups(s);
  const canonical = g.map((x) => x.toString(16)).join(':');
  const c = (scope: Scope, reason: string): Class => ({ scope, reason, canonical });
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const embedded = (hi: number, lo: number) => ((hi << 16) | lo) >>> 0;
  if (zeros(0, 8)) return c('refused', 'unspecified address');
  if (zeros(0, 7) && g[7] === 1) return c('loopback', 'loopback address');
  if (zeros(0, 5) && g[5] === 0xffff) return classifyV4(embedded(g[6]!, g[7]!), 'IPv4-mapped ');
  if (zeros(0, 6)) return classifyV4(embedded(g[6]!, g[7]!), 'IPv4-compatible ');
  // NAT64 and 6to4 carry an IPv4 destination a gateway would reach for us.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return classifyV4(embedded(g[6]!, g[7]!), 'NAT64 ');
  if (g[0] === 0x2002) {
    const inner = classifyV4(embedded(g[1]!, g[2]!), '6to4 ');
    if (inner.scope !== 'public') return inner;
  }
  if ((g[0]! & 0xffc0) === 0xfe80) return c('refused', 'link-local address (cloud metadata)');
  if ((g[0]! & 0xff00) === 0xff00) return c('refused', 'multicast address');
  if (canonical === 'fd00:ec2:0:0:0:0:0:254') return c('refused', 'cloud metadata address');
  if ((g[0]! & 0xfe00) === 0xfc00 || (g[0]! & 0xffc0) === 0xfec0) return c('private', 'private network address');
  return c('public', '');
}

/** The class of an IP literal (IPv4 dotted quad or IPv6, zone ignored), or undefined for a name. */
function classify(ip: string): Class | undefined {
  const bare = ip.replace(/%.*$/, '');
  const v = net.isIP(bare);
  if (v === 4) return classifyV4(v4number(bare));
  if (v === 6) return classifyV6(bare.toLowerCase());
  return undefined;
}

/**
 * A host as a URL would reach it: lower case, brackets and a trailing dot removed, and IPv4 in any
 * form a URL parser accepts (2130706433, 0x7f.1, 0177.0.0.1, 127.1) as a dotted quad; undefined
 * when it is not a valid host.
 */
export function normaliseHost(host: string): string | undefined {
  if (/^\[[0-9a-fA-F:.]+\]$/.test(host)) return net.isIPv6(host.slice(1, -1)) ? host.slice(1, -1).toLowerCase() : undefined;
  if (net.isIPv6(host)) return host.toLowerCase();
  // Only what may appear in a host: no userinfo, path, port or percent-encoding tricks reach the URL parser.
  if (!/^[A-Za-z0-9._-]+$/.test(host) || host.length > 253) return undefined;
  let h: string;
  try {
    h = new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** True when `host` (normalised) matches one of `patterns`: `example.com` is that host, `*.example.com` it and every subdomain. */
export function domainAllowed(host: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => (p.startsWith('*.') ? host === p.slice(2) || host.endsWith(p.slice(1)) : host === p));
}

/** Most patterns one browser may be limited to. */
export const MAX_ALLOWED_DOMAINS = 100;

/** The patterns of `allowed_domains` as they are matched (lower case, IP literals canonical); INVALID_ARGUMENT for a bad one. */
export function allowedDomainPatterns(list: readonly string[]): string[] {
  if (list.length > MAX_ALLOWED_DOMAINS) throw new InvalidArgumentError(`allowed_domains takes at most ${MAX_ALLOWED_DOMAINS} patterns`);
  return list.map((p) => {
    const wild = p.startsWith('*.');
    const host = normaliseHost(wild ? p.slice(2) : p);
    if (host === undefined || host === '' || (wild && classify(host))) throw new InvalidArgumentError(`allowed_domains: "${p}" is not a domain pattern such as example.com or *.example.com`);
    return wild ? `*.${host}` : host;
  });
}

/** This host's own interface addresses, canonical (see {@link refusal}). */
export function hostAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) {
    const c = classify(a.address);
    if (c) out.add(c.canonical);
  }
  return out;
}

/**
 * Why a destination is refused, or undefined when it is allowed. `address` is an IP literal in any
 * form or a name; a name other than localhost and the cloud metadata names is only checked against
 * `deniedEndpoints` by name — the caller resolves it and checks every address.
 */
export function refusal(address: string, port: number, policy: EgressPolicy, ownAddresses: ReadonlySet<string> = hostAddresses()): string | undefined {
  const host = normaliseHost(address);
  if (host === undefined) return 'invalid host';
  if (!Number.isInteger(port) || port < 1 || port > 65535) return 'invalid port';
  let c = classify(host);
  for (const e of policy.deniedEndpoints ?? []) {
    if (e.port !== port) continue;
    const other = normaliseHost(e.host);
    if (other === undefined) continue;
    const oc = classify(other);
    if (c && oc ? c.canonical === oc.canonical : other === host) return 'denied endpoint';
  }
  if (!c) {
    if (METADATA_NAMES.has(host)) return 'cloud metadata host name';
    // Resolves to loopback everywhere (RFC 6761), also at an upstream proxy we cannot see into.
    if (host === 'localhost' || host.endsWith('.localhost')) c = classifyV4(v4number('127.0.0.1'));
    else return undefined;
  }
  if (c.scope === 'refused') return c.reason;
  const own = c.scope !== 'loopback' && ownAddresses.has(c.canonical);
  if (!policy.allowPrivateNetworks) {
    if (c.scope === 'loopback' || c.scope === 'private') return c.reason;
    if (own) return "this host's own address";
  }
  if ((c.scope === 'loopback' || own) && policy.deniedLocalPorts.has(port)) return `internal service port ${port}`;
  return undefined;
}

// ---- the proxy ----

/** A refused destination or a failed tunnel, answered with `status`. */
class EgressError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly refused = false,
  ) {
    super(message);
    this.name = this.constructor.name;
  }
}

/** Parses a CONNECT target `host:port` / `[v6]:port`. */
function parseAuthority(s: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(s);
  if (!m) return undefined;
  return { host: m[1]!, port: Number(m[2]) };
}

/** Reads from a socket until `complete(buffer)` gives a length; returns the head and what followed. */
function readHead(socket: net.Socket, complete: (b: Buffer) => number | undefined, max = MAX_HEAD): Promise<{ head: Buffer; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const done = (err?: Error) => {
      socket.off('data', onData).off('error', done).off('close', onClose);
      if (err) reject(err);
    };
    const onClose = () => done(new Error('upstream closed the connection'));
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const n = complete(buf);
      if (n !== undefined && n <= buf.length) {
        done();
        resolve({ head: buf.subarray(0, n), rest: buf.subarray(n) });
      } else if (buf.length > max) done(new Error('upstream reply too long'));
    };
    socket.on('data', onData).on('error', done).on('close', onClose);
  });
}

const httpHeadEnd = (b: Buffer) => {
  const i = b.indexOf('\r\n\r\n');
  return i === -1 ? undefined : i + 4;
};

/** Request headers to forward: hop-by-hop ones (and those named in Connection) and every Proxy-* header dropped. */
function forwardHeaders(raw: string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'connection') for (const t of raw[i + 1]!.split(',')) named.add(t.trim().toLowerCase());
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(k) || named.has(k) || k.startsWith('proxy-')) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** Raw headers (name, value, name, value …) without those called `name` (lower case). */
function withoutHeader(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() !== name) out.push(raw[i]!, raw[i + 1]!);
  return out;
}

const blockedPage = (reason: string) =>
  `<!doctype html><meta charset="utf-8"><title>Blocked</title><p>Blocked by the browser network policy: ${reason.replace(/[<>&"]/g, '')}</p>\n`;

interface Upstream {
  url: URL;
  /** `Basic …` from the URL's user and password. */
  auth: string | undefined;
  agent: http.Agent;
}

/** One browser's enforcing forward proxy on 127.0.0.1 (see the file comment). */
export class EgressProxy {
  readonly #server: http.Server;
  #port = 0;
  readonly #policy: EgressPolicy;
  readonly #logger: Logger;
  readonly #lookup: LookupAll;
  /** Whether deniedEndpoints names hosts (then their addresses are looked up and refused too). */
  readonly #deniedNames: boolean;
  readonly #connectTimeoutMs: number;
  readonly #sockets = new Set<net.Socket>();
  readonly #agent = new http.Agent({ keepAlive: true, maxFreeSockets: 8, timeout: 60_000 });
  #upstream: Upstream | undefined;
  #own: { at: number; set: Set<string> } | undefined;
  #endpoints: { at: number; list: Promise<{ host: string; port: number }[]> } | undefined;
  #stopping: Promise<void> | undefined;
  #allowedDomains: readonly string[] | undefined;
  #blocker: RequestBlocker | undefined;
  #blocked = 0;

  private constructor(server: http.Server, o: EgressProxyOptions) {
    this.#server = server;
    this.#policy = o.policy;
    this.#logger = o.logger;
    this.#connectTimeoutMs = o.connectTimeoutMs ?? 30_000;
    this.#lookup = o.lookup || o.dnsCacheMs !== undefined ? cachedLookup(o.lookup ?? dnsLookup, o.dnsCacheMs ?? DNS_CACHE_MS) : systemLookup;
    this.#deniedNames = (o.policy.deniedEndpoints ?? []).some((e) => {
      const h = normaliseHost(e.host);
      return h !== undefined && !classify(h);
    });
    this.setUpstream(o.upstream);
    server.on('connection', (s: net.Socket) => this.#track(s));
    server.on('clientError', (err: Error, socket: Duplex) => {
      this.#logger.debug({ err: err.message }, 'egress proxy: bad request from the browser');
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      socket.destroy();
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.#request(req, res));
    server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#connect(req, socket, head));
    server.on('upgrade', (_req: http.IncomingMessage, socket: net.Socket) => {
      // Chromium tunnels WebSockets with CONNECT; an Upgrade on a plain request is not ours to pass.
      socket.on('error', () => {});
      socket.end('HTTP/1.1 501 Not Implemented\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
  }

  /** Ports of every egress proxy of this process, from the moment it listens until it stops (no browser may reach another's). */
  static readonly livePorts = new Set<number>();

  /**
   * Starts a proxy on a free port of 127.0.0.1, or on a Unix socket (`socketPath`) for a browser
   * in a network namespace of its own, which reaches it through a forwarder on its loopback.
   */
  static async start(o: EgressProxyOptions & { socketPath?: string | undefined; port?: number | undefined }): Promise<EgressProxy> {
    const server = http.createServer({ maxHeaderSize: MAX_HEAD, requestTimeout: 0, keepAliveTimeout: 30_000 });
    const p = new EgressProxy(server, o);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const listening = () => {
        server.off('error', reject);
        if (o.socketPath) {
          fs.chmodSync(o.socketPath, 0o666); // the browser's uid connects; its folder keeps everyone else out
        } else {
          p.#port = (server.address() as net.AddressInfo).port;
          EgressProxy.livePorts.add(p.#port);
        }
        resolve();
      };
      if (o.socketPath) server.listen(o.socketPath, listening);
      else server.listen(o.port ?? 0, '127.0.0.1', listening); // a port of its own, or the one a browser taken over after a restart points at
    });
    return p;
  }

  /** The port Chromium's `--proxy-server=http://127.0.0.1:<port>` points at. */
  get port(): number {
    return this.#port;
  }

  /** The upstream proxy (per-country, may carry user:password) for this browser from now on; undefined = direct. */
  setUpstream(url: URL | undefined): void {
    const old = this.#upstream;
    if (old?.url.href === url?.href) return;
    if (!url) this.#upstream = undefined;
    else {
      if (!['http:', 'https:', 'socks4:', 'socks5:'].includes(url.protocol)) throw new Error(`unsupported upstream proxy scheme ${url.protocol}`);
      const auth = url.username ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}` : undefined;
      const agent = url.protocol === 'https:' ? new https.Agent({ keepAlive: true, maxFreeSockets: 8, timeout: 60_000 }) : new http.Agent({ keepAlive: true, maxFreeSockets: 8, timeout: 60_000 });
      this.#upstream = { url, auth, agent };
    }
    old?.agent.destroy();
    // Nothing keeps going the old way: Chromium reconnects, through the new route.
    for (const s of this.#sockets) s.destroy();
  }

  /** Stops listening and cuts every connection and tunnel. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= new Promise<void>((resolve) => {
      this.#server.close(() => {
        EgressProxy.livePorts.delete(this.#port);
        resolve();
      });
      for (const s of this.#sockets) s.destroy();
      this.#agent.destroy();
      this.#upstream?.agent.destroy();
    });
    return this.#stopping;
  }

  #track(s: net.Socket): void {
    if (this.#stopping) {
      s.destroy();
      return;
    }
    this.#sockets.add(s);
    s.once('close', () => this.#sockets.delete(s));
    s.on('error', () => {});
  }

  #ownAddresses(): Set<string> {
    const now = Date.now();
    if (!this.#own || now - this.#own.at > 2000) this.#own = { at: now, set: hostAddresses() };
    return this.#own.set;
  }

  /** The policy with the names of deniedEndpoints also as their addresses (resolved at most once a minute). */
  async #effectivePolicy(): Promise<EgressPolicy> {
    if (!this.#deniedNames) return this.#policy;
    const denied = this.#policy.deniedEndpoints ?? [];
    const now = Date.now();
    if (!this.#endpoints || now - this.#endpoints.at > 60_000) {
      const list = Promise.all(
        denied.map(async (e) => {
          const h = normaliseHost(e.host);
          if (h === undefined || classify(h)) return [e];
          const addrs = await this.#lookup(h).catch(() => []);
          return [e, ...addrs.map((a) => ({ host: a.address, port: e.port }))];
        }),
      ).then((x) => x.flat());
      this.#endpoints = { at: now, list };
    }
    return { ...this.#policy, deniedEndpoints: await this.#endpoints.list };
  }

  /**
   * Limits every request of the browser to hosts matching `patterns` (`example.com`: that host;
   * `*.example.com`: it and every subdomain); undefined or empty: no limit. Set when a warm browser
   * is handed out. Enforced here, at the network, so navigations, new tabs, redirects, form posts,
   * subresources and WebSockets outside are all refused alike.
   */
  setAllowedDomains(patterns: readonly string[] | undefined): void {
    this.#allowedDomains = patterns?.length ? patterns : undefined;
  }

  /**
   * Blocks ads and trackers from now on (`block_ads`; undefined: none). Here rather than in the
   * browser: every request passes this proxy anyway, so a blocked one costs a lookup in memory
   * and never reaches DNS or the network (see adblock.ts for what is matched on https).
   */
  setBlocker(blocker: RequestBlocker | undefined): void {
    this.#blocker = blocker;
  }

  /** Requests refused as ads or trackers so far. */
  get blockedCount(): number {
    return this.#blocked;
  }

  /** The filter rule that blocks this request, counted, or undefined. */
  #blockedBy(url: string, sourceUrl: string | undefined, type?: RequestType): string | undefined {
    const rule = this.#blocker?.blocking(url, sourceUrl, type);
    if (rule) {
      this.#blocked++;
      this.#logger.debug({ url, rule }, 'egress: ad or tracker blocked');
    }
    return rule;
  }

  /**
   * Checks a destination and decides where to connect: the checked addresses (direct), or the
   * normalised host for the upstream to resolve. Throws EgressError when refused.
   */
  async #route(rawHost: string, port: number): Promise<{ host: string; addresses: string[] }> {
    const policy = await this.#effectivePolicy();
    const own = this.#ownAddresses();
    const host = normaliseHost(rawHost);
    const first = host === undefined ? 'invalid host' : refusal(host, port, policy, own);
    if (first || host === undefined) throw new EgressError(403, first ?? 'invalid host', true);
    if (this.#allowedDomains && !domainAllowed(host, this.#allowedDomains)) throw new EgressError(403, `${host} is outside the domains this browser may reach (${this.#allowedDomains.join(', ')})`, true);
    if (classify(host)) return { host, addresses: [host] };
    let resolved: { address: string }[];
    try {
      resolved = await this.#lookup(host);
    } catch {
      // A name only the upstream knows cannot be one of ours.
      if (this.#upstream) return { host, addresses: [host] };
      throw new EgressError(502, `cannot resolve ${host}`);
    }
    if (!resolved.length) throw new EgressError(502, `cannot resolve ${host}`);
    for (const a of resolved) {
      const r = refusal(a.address, port, policy, own);
      if (r) throw new EgressError(403, r, true);
    }
    // With an upstream the name goes on (the upstream resolves it where it is), checked here first:
    // a name that resolves to a metadata, internal or private address is refused all the same.
    if (this.#upstream) return { host, addresses: [host] };
    return { host, addresses: resolved.map((a) => a.address) };
  }

  /** A TCP connection to the first checked address that answers. */
  async #dialDirect(addresses: string[], port: number): Promise<net.Socket> {
    let last: Error | undefined;
    for (const address of addresses) {
      try {
        return await this.#dial(() => net.connect({ host: address, port }), 'connect');
      } catch (err) {
        last = err as Error;
      }
    }
    throw new EgressError(502, `cannot connect: ${last?.message ?? 'no address'}`);
  }

  #dial(make: () => net.Socket, ready: 'connect' | 'secureConnect'): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const s = make();
      this.#track(s);
      const timer = setTimeout(() => s.destroy(new Error('connect timeout')), this.#connectTimeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        s.destroy();
        reject(err);
      };
      s.once('error', fail);
      s.once(ready, () => {
        clearTimeout(timer);
        s.off('error', fail);
        resolve(s);
      });
    });
  }

  #dialUpstream(u: URL): Promise<net.Socket> {
    const host = u.hostname.replace(/^\[|\]$/g, '');
    const port = Number(u.port) || { 'https:': 443, 'http:': 80 }[u.protocol] || 1080;
    return u.protocol === 'https:'
      ? this.#dial(() => tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] }), 'secureConnect')
      : this.#dial(() => net.connect({ host, port }), 'connect');
  }

  /** A byte stream to host:port through the upstream proxy (HTTP CONNECT or SOCKS). */
  async #tunnelUpstream(up: Upstream, host: string, port: number): Promise<{ socket: net.Socket; rest: Buffer }> {
    const s = await this.#dialUpstream(up.url).catch((err: Error) => {
      throw new EgressError(502, `upstream proxy unreachable: ${err.message}`);
    });
    try {
      if (up.url.protocol === 'socks5:') return { socket: s, rest: await socks5(s, host, port) };
      if (up.url.protocol === 'socks4:') return { socket: s, rest: await socks4a(s, host, port) };
      const authority = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
      s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${up.auth ? `Proxy-Authorization: ${up.auth}\r\n` : ''}\r\n`);
      const { head, rest } = await readHead(s, httpHeadEnd);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.toString('latin1'))?.[1]);
      if (status === 407) throw new EgressError(502, 'the upstream proxy refused the credentials');
      if (!(status >= 200 && status < 300)) throw new EgressError(502, `the upstream proxy answered ${status || 'garbage'}`);
      return { socket: s, rest };
    } catch (err) {
      s.destroy();
      throw err instanceof EgressError ? err : new EgressError(502, `upstream proxy: ${(err as Error).message}`);
    }
  }

  #refused(err: EgressError, what: string): void {
    if (err.refused) this.#logger.debug({ destination: what, reason: err.message }, 'egress refused');
    else this.#logger.debug({ destination: what, err: err.message }, 'egress failed');
  }

  #connect(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    client.on('error', () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    const reply = (status: number) => {
      if (client.writable) client.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      client.destroy();
    };
    if (!target) return reply(400);
    // Only the host is known for a tunnel: the lists' host rules decide (adblock.ts).
    const host = normaliseHost(target.host);
    if (host && this.#blockedBy(`https://${net.isIPv6(host) ? `[${host}]` : host}${target.port === 443 ? '' : `:${target.port}`}/`, undefined)) return reply(403);
    void (async () => {
      let up: net.Socket;
      let rest: Buffer = Buffer.alloc(0);
      try {
        const { host, addresses } = await this.#route(target.host, target.port);
        const upstream = this.#upstream;
        if (upstream) ({ socket: up, rest } = await this.#tunnelUpstream(upstream, host, target.port));
        else up = await this.#dialDirect(addresses, target.port);
      } catch (err) {
        const e = err instanceof EgressError ? err : new EgressError(502, (err as Error).message);
        this.#refused(e, req.url ?? '');
        return reply(e.status);
      }
      if (client.destroyed) return void up.destroy();
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (rest.length) client.write(rest);
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
      up.on('error', () => up.destroy());
      up.once('close', () => client.destroy());
      client.once('close', () => up.destroy());
    })();
  }

  #request(req: http.IncomingMessage, res: http.ServerResponse): void {
    req.on('error', () => res.destroy());
    res.on('error', () => {});
    const fail = (status: number, body: string, type = 'text/plain; charset=utf-8', failure?: string) => {
      if (res.headersSent) return void res.destroy();
      res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(body), Connection: 'close', ...(failure ? { [EGRESS_FAILURE_HEADER]: failure } : {}) }).end(body);
      req.resume();
    };
    /** The site could not be reached (not a refusal): the page says so, and the header tells the agent why. */
    const unreachable = (why: string) => fail(502, `The browser's egress proxy could not reach ${url.hostname}: ${why}.\n`, undefined, why);
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return fail(400, 'This is a proxy: send absolute-URI requests or CONNECT.\n');
    }
    if (url.protocol !== 'http:') return fail(400, 'Only http:// requests are proxied; https goes through CONNECT.\n');
    if (!ALLOWED_METHODS.has(req.method ?? '')) return fail(405, 'Method not allowed by the proxy.\n');
    const port = Number(url.port) || 80;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const what = `${url.hostname}:${port}`;
    const rule = this.#blocker && this.#blockedBy(url.href, typeof req.headers.referer === 'string' ? req.headers.referer : undefined, requestType(req.headers));
    if (rule) return fail(403, blockedPage(`an ad or tracker (filter list rule ${rule})`), 'text/html; charset=utf-8');
    void (async () => {
      const upstream = this.#upstream;
      let options: http.RequestOptions;
      const headers = forwardHeaders(req.rawHeaders);
      try {
        const route = await this.#route(host, port);
        const path = `${url.pathname}${url.search}`;
        if (!upstream) {
          // The agent's pool is keyed by address, so a kept-alive socket always leads to a checked address.
          const socket = route.addresses.length > 1 ? await this.#dialDirect(route.addresses, port) : undefined;
          options = socket ? { createConnection: () => socket } : { host: route.addresses[0]!, port, agent: this.#agent };
          options = { ...options, method: req.method!, path, headers: headers as unknown as http.OutgoingHttpHeaders, setHost: false };
        } else if (upstream.url.protocol === 'http:' || upstream.url.protocol === 'https:') {
          const authority = net.isIPv6(route.host) ? `[${route.host}]${url.port ? `:${url.port}` : ''}` : `${route.host}${url.port ? `:${url.port}` : ''}`;
          options = {
            host: upstream.url.hostname.replace(/^\[|\]$/g, ''),
            port: Number(upstream.url.port) || (upstream.url.protocol === 'https:' ? 443 : 80),
            agent: upstream.agent,
            method: req.method!,
            path: `http://${authority}${path}`,
            headers: [...headers, ...(upstream.auth ? ['Proxy-Authorization', upstream.auth] : [])] as unknown as http.OutgoingHttpHeaders,
            setHost: false,
          };
        } else {
          const { socket, rest } = await this.#tunnelUpstream(upstream, route.host, port);
          if (rest.length) socket.unshift(rest);
          options = { createConnection: () => socket, method: req.method!, path, headers: headers as unknown as http.OutgoingHttpHeaders, setHost: false };
        }
      } catch (err) {
        const e = err instanceof EgressError ? err : new EgressError(502, (err as Error).message);
        this.#refused(e, what);
        if (e.refused) return fail(403, blockedPage(e.message), 'text/html; charset=utf-8');
        return e.status === 502 ? unreachable(e.message) : fail(e.status, `${e.message}\n`);
      }
      // Chromium sends Host; a request without one (HTTP/1.0) gets the URL's.
      if (!req.headers.host) (options.headers as unknown as string[]).push('Host', url.host);
      const lib = upstream?.url.protocol === 'https:' ? https : http;
      const out = lib.request(options, (r) => {
        if (upstream && r.statusCode === 407) {
          r.resume();
          return unreachable('the upstream proxy refused the credentials');
        }
        const hs = withoutHeader(forwardHeaders(r.rawHeaders), EGRESS_FAILURE_HEADER);
        res.writeHead(r.statusCode ?? 502, r.statusMessage, hs);
        r.pipe(res);
        r.on('error', () => res.destroy());
      });
      out.on('error', (err) => {
        this.#logger.debug({ destination: what, err: err.message }, 'egress request failed');
        unreachable(`cannot connect: ${err.message}`);
      });
      res.on('close', () => {
        if (!res.writableFinished) out.destroy();
      });
      req.pipe(out);
    })();
  }
}

// ---- SOCKS clients (the upstream names the host: no local resolution) ----

async function socks5(s: net.Socket, host: string, port: number): Promise<Buffer> {
  s.write(Buffer.from([5, 1, 0]));
  const hello = await readHead(s, (b) => (b.length >= 2 ? 2 : undefined));
  if (hello.head[0] !== 5 || hello.head[1] !== 0) throw new Error('SOCKS5 proxy wants authentication');
  const v = net.isIP(host);
  const addr =
    v === 4
      ? Buffer.from([1, ...host.split('.').map(Number)])
      : v === 6
        ? Buffer.from([4, ...v6groups(host).flatMap((g) => [g >> 8, g & 255])])
        : Buffer.concat([Buffer.from([3, Buffer.byteLength(host)]), Buffer.from(host)]);
  if (hello.rest.length) throw new Error('SOCKS5 proxy sent too much');
  s.write(Buffer.concat([Buffer.from([5, 1, 0]), addr, Buffer.from([port >> 8, port & 255])]));
  const reply = await readHead(s, (b) => {
    if (b.length < 5) return undefined;
    const len = b[3] === 1 ? 4 : b[3] === 4 ? 16 : 1 + b[4]!;
    return 4 + len + 2;
  });
  if (reply.head[1] !== 0) throw new Error(`SOCKS5 proxy refused (code ${reply.head[1]})`);
  return reply.rest;
}

async function socks4a(s: net.Socket, host: string, port: number): Promise<Buffer> {
  const v4 = net.isIPv4(host);
  if (net.isIPv6(host)) throw new Error('SOCKS4 cannot reach IPv6');
  const ip = v4 ? host.split('.').map(Number) : [0, 0, 0, 1];
  s.write(Buffer.concat([Buffer.from([4, 1, port >> 8, port & 255, ...ip, 0]), v4 ? Buffer.alloc(0) : Buffer.from(`${host}\0`)]));
  const reply = await readHead(s, (b) => (b.length >= 8 ? 8 : undefined));
  if (reply.head[1] !== 0x5a) throw new Error(`SOCKS4 proxy refused (code ${reply.head[1]})`);
  return reply.rest;
}
