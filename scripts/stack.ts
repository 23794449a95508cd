/**
 * Starts the whole service as separate processes: an optional child nats-server, the four
 * services and the gateway, each in its own process group. Used by `make up` and by the
 * integration tests, so both run exactly the same processes. Every process gets the same
 * internal token (DATA_DIR/internal-token unless one is given); a child nats-server requires
 * a token generated for it, which only the services are told.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadInternalToken, type InternalToken } from '../services/common/src/internal-token.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repository root, whether this runs from `scripts/` or from `dist/scripts/`. */
export const ROOT = path.resolve(HERE, HERE.split(path.sep).includes('dist') ? '../..' : '..');

export type ServiceName = 'file-storage' | 'live-view' | 'browser-pool' | 'run' | 'gateway';
export const SERVICE_NAMES: ServiceName[] = ['file-storage', 'live-view', 'browser-pool', 'run', 'gateway'];

const ENTRY: Record<ServiceName, string> = {
  'file-storage': 'services/file-storage/src/main',
  'live-view': 'services/live-view/src/main',
  'browser-pool': 'services/browser-pool/src/main',
  run: 'services/run/src/main',
  gateway: 'gateway/src/main',
};

/** The public HTTP edges some services serve besides gRPC, and the variables that place them. */
export type Edge = 'files' | 'cdp' | 'liveView';
export const EDGES: Record<Edge, { service: ServiceName; host: string; port: string; url: string; defaultPort: number }> = {
  files: { service: 'file-storage', host: 'FILES_HTTP_HOST', port: 'FILES_HTTP_PORT', url: 'FILES_PUBLIC_URL', defaultPort: 8081 },
  liveView: { service: 'live-view', host: 'LIVE_VIEW_HTTP_HOST', port: 'LIVE_VIEW_HTTP_PORT', url: 'LIVE_VIEW_BASE_URL', defaultPort: 8082 },
  cdp: { service: 'browser-pool', host: 'CDP_HOST', port: 'CDP_PORT', url: 'CDP_PUBLIC_URL', defaultPort: 9222 },
};

/** A free TCP port on 127.0.0.1 (bound and released; fine for local launches and tests). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves true when something accepts TCP connections at host:port. */
export function canConnect(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
    if (await check()) return;
    if (child && child.exitCode !== null) throw new Error(`${what}: process exited with code ${child.exitCode}`);
    if (Date.now() > until) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** Kills a process group; ignores groups already gone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    /* gone */
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Stops a child: SIGTERM to its group, SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  killGroup(child.pid, 'SIGTERM');
  const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(timer);
  killGroup(child.pid, 'SIGKILL'); // anything the child left in its group
}

/**
 * A child nats-server with JetStream on a free port that requires a new random token. The
 * token goes in a config file (mode 0600), never on the command line, where any local user
 * could read it.
 */
export async function startNats(storeDir: string, onLine: (line: string) => void): Promise<{ url: string; token: string; child: ChildProcess }> {
  const port = await freePort();
  fs.mkdirSync(storeDir, { recursive: true });
  const token = randomBytes(24).toString('base64url');
  const conf = path.join(storeDir, 'auth.conf');
  fs.rmSync(conf, { force: true }); // a file of an earlier start may have other permissions
  fs.writeFileSync(conf, `authorization {\n  token: "${token}"\n}\n`, { mode: 0o600 });
  const child = spawn('nats-server', ['-c', conf, '-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const failed = new Promise<never>((_, reject) =>
    child.once('error', (err) => reject(new Error(`cannot start nats-server (${err.message}); install it (apt-get install nats-server) or set NATS_URL`))),
  );
  for (const s of [child.stdout!, child.stderr!]) readline.createInterface({ input: s }).on('line', onLine);
  await Promise.race([failed, waitFor('nats-server', () => canConnect('127.0.0.1', port), 15000, child)]);
  return { url: `nats://127.0.0.1:${port}`, token, child };
}

export interface StackOptions {
  dataDir: string;
  /** An existing NATS; unset starts a child nats-server (which then requires a generated token). */
  natsUrl?: string | undefined;
  /** The token the existing NATS requires, if any. */
  natsToken?: string | undefined;
  /** The internal token (INTERNAL_TOKEN) or a file holding it; neither = DATA_DIR/internal-token. */
  internalToken?: string | undefined;
  internalTokenFile?: string | undefined;
  databaseUrl?: string | undefined;
  gatewayHost?: string;
  gatewayPort?: number;
  /** Ports of the public HTTP edges (blob links, CDP proxy, live view); free ones when unset. */
  edgePorts?: Partial<Record<Edge, number>>;
  /** Base URLs of those edges as clients reach them; default http://localhost:<port>. */
  edgeUrls?: Partial<Record<Edge, string | undefined>>;
  apiKey: string;
  logLevel?: string;
  /** `dist` runs the built JavaScript; `tsx` runs the TypeScript sources. */
  mode: 'dist' | 'tsx';
  /** Every line a process prints. */
  onLine?: (service: ServiceName | 'nats', line: string) => void;
  /** Extra environment for every service. */
  env?: Record<string, string>;
  shutdownTimeoutMs?: number;
}

/** A running stack. */
export class Stack {
  readonly opts: StackOptions;
  readonly children = new Map<ServiceName, ChildProcess>();
  readonly ports = new Map<ServiceName, number>();
  nats: ChildProcess | undefined;
  natsUrl = '';
  /** The token NATS requires (generated for a child nats-server); undefined = none. */
  natsToken: string | undefined;
  /** The credential every service requires of internal gRPC calls (for tests calling them directly). */
  readonly internalToken: InternalToken;
  gatewayPort = 0;
  readonly edgePorts = new Map<Edge, number>();
  #stopping = false;
  /** Called when a service exits while the stack is not stopping. */
  onExit: ((service: ServiceName, code: number | null, signal: NodeJS.Signals | null) => void) | undefined;

  constructor(opts: StackOptions) {
    this.opts = opts;
    // Resolved (and generated) here, before any service starts, so that they all read one file.
    this.internalToken = loadInternalToken({ internalToken: opts.internalToken, internalTokenFile: opts.internalTokenFile, dataDir: opts.dataDir });
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.gatewayPort}`;
  }

  /** Base URL of an edge as clients reach it. */
  edgeUrl(edge: Edge): string {
    return this.opts.edgeUrls?.[edge] ?? `http://localhost:${this.edgePorts.get(edge)}`;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  #env(service: ServiceName): NodeJS.ProcessEnv {
    const addr = (s: ServiceName) => `127.0.0.1:${this.ports.get(s)}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this.opts.env,
      DATA_DIR: this.opts.dataDir,
      LOG_LEVEL: this.opts.logLevel ?? 'info',
      NATS_URL: this.natsUrl,
      GRPC_HOST: '127.0.0.1',
      RUN_SERVICE_ADDR: addr('run'),
      BROWSER_POOL_SERVICE_ADDR: addr('browser-pool'),
      FILE_STORAGE_SERVICE_ADDR: addr('file-storage'),
      LIVE_VIEW_SERVICE_ADDR: addr('live-view'),
      SHUTDOWN_TIMEOUT_MS: String(this.opts.shutdownTimeoutMs ?? 10000),
    };
    delete env.BOOTSTRAP_API_KEY;
    for (const v of ['INTERNAL_TOKEN', 'INTERNAL_TOKEN_FILE', 'NATS_TOKEN']) delete env[v];
    if (this.opts.internalToken) env.INTERNAL_TOKEN = this.opts.internalToken;
    if (this.opts.internalTokenFile) env.INTERNAL_TOKEN_FILE = path.resolve(this.opts.internalTokenFile);
    if (this.natsToken && service !== 'gateway') env.NATS_TOKEN = this.natsToken; // the gateway does not use NATS
    if (this.opts.databaseUrl) env.DATABASE_URL = this.opts.databaseUrl;
    else delete env.DATABASE_URL;
    if (service === 'browser-pool') {
      // Browsers may open local sites, but no service's internal port (the pool knows its peers' only).
      const natsPort = Number(new URL(this.natsUrl).port) || 4222;
      env.BROWSER_DENIED_PORTS = [...[...this.ports.values()], natsPort, ...(this.opts.env?.BROWSER_DENIED_PORTS ?? '').split(',').filter(Boolean).map(Number)].join(',');
    }
    for (const [edge, e] of Object.entries(EDGES) as [Edge, (typeof EDGES)[Edge]][]) {
      // Every service learns every edge's URL (the pool puts live view URLs into records);
      // only the owner binds the port.
      env[e.url] = this.edgeUrl(edge);
      if (e.service === service) {
        env[e.host] = this.opts.gatewayHost ?? '127.0.0.1';
        env[e.port] = String(this.edgePorts.get(edge));
      }
    }
    if (service === 'gateway') {
      env.PORT = String(this.gatewayPort);
      env.HOST = this.opts.gatewayHost ?? '127.0.0.1';
      env.BOOTSTRAP_API_KEY = this.opts.apiKey; // only the gateway ever sees the key
    } else {
      env.GRPC_PORT = String(this.ports.get(service));
    }
    return env;
  }

  /** Starts (or restarts) one service and waits until its port accepts connections. */
  async startService(service: ServiceName): Promise<void> {
    const entry = ENTRY[service];
    const args = this.opts.mode === 'dist' ? [path.join(ROOT, 'dist', `${entry}.js`)] : ['--import', 'tsx', path.join(ROOT, `${entry}.ts`)];
    const child = spawn(process.execPath, args, { cwd: ROOT, env: this.#env(service), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.children.set(service, child);
    for (const s of [child.stdout!, child.stderr!]) readline.createInterface({ input: s }).on('line', (l) => this.opts.onLine?.(service, l));
    child.once('exit', (code, signal) => {
      if (!this.#stopping && this.children.get(service) === child) this.onExit?.(service, code, signal);
    });
    const port = service === 'gateway' ? this.gatewayPort : this.ports.get(service)!;
    await waitFor(service, () => canConnect('127.0.0.1', port), 60000, child);
  }

  /** Starts NATS (unless given) and every service; resolves when all accept connections. */
  async start(): Promise<void> {
    if (this.opts.natsUrl) {
      this.natsUrl = this.opts.natsUrl;
      this.natsToken = this.opts.natsToken;
    } else {
      const n = await startNats(path.join(this.opts.dataDir, 'nats'), (l) => this.opts.onLine?.('nats', l));
      this.nats = n.child;
      this.natsUrl = n.url;
      this.natsToken = n.token;
    }
    for (const s of SERVICE_NAMES) if (s !== 'gateway') this.ports.set(s, await freePort());
    this.gatewayPort = this.opts.gatewayPort ?? (await freePort());
    for (const edge of Object.keys(EDGES) as Edge[]) this.edgePorts.set(edge, this.opts.edgePorts?.[edge] ?? (await freePort()));
    this.ports.set('gateway', this.gatewayPort);
    try {
      await Promise.all(SERVICE_NAMES.filter((s) => s !== 'gateway').map((s) => this.startService(s)));
      await this.startService('gateway');
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Kills one service at once (SIGKILL), as a crash would. */
  async kill(service: ServiceName): Promise<void> {
    const child = this.children.get(service);
    if (!child) return;
    this.children.delete(service);
    killGroup(child.pid, 'SIGKILL');
    await exited(child);
  }

  /** Process ids of everything the stack started. */
  pids(): number[] {
    return [...this.children.values(), ...(this.nats ? [this.nats] : [])].map((c) => c.pid!).filter(Boolean);
  }

  /** Stops the gateway first, then the services, then NATS. Idempotent. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const grace = (this.opts.shutdownTimeoutMs ?? 10000) + 2000;
    const gw = this.children.get('gateway');
    if (gw) await stopChild(gw, grace);
    await Promise.all([...this.children.entries()].filter(([s]) => s !== 'gateway').map(([, c]) => stopChild(c, grace)));
    this.children.clear();
    if (this.nats) await stopChild(this.nats, 5000);
  }
}
