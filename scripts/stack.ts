/**
 * Starts the whole service as separate processes: an optional child nats-server, the embedded
 * database process (unless DATABASE_URL names a Postgres), the five services and the gateway,
 * each in its own process group. Used by `make up` and by the integration tests, so both run
 * exactly the same processes. Every process gets the same internal token (DATA_DIR/internal-token
 * unless one is given); a child nats-server requires a token generated for it, which only the
 * services are told.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { embeddedDatabaseRunning, embeddedDatabaseUrl, hasPerServiceDatabases } from '../services/common/src/embedded-database.js';
import { acquireLock, LockHeldError, type LockFile } from '../services/common/src/lock-file.js';
import { INTERNAL_TOKEN_FILE_NAME, loadInternalToken, type InternalToken } from '../services/common/src/internal-token.js';
import type { S3Server } from '../services/file-storage/src/testing/s3-server.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repository root, whether this runs from `scripts/` or from `dist/scripts/`. */
export const ROOT = path.resolve(HERE, HERE.split(path.sep).includes('dist') ? '../..' : '..');

export type ServiceName = 'file-storage' | 'live-view' | 'browser-pool' | 'webhooks' | 'run' | 'gateway';
export const SERVICE_NAMES: ServiceName[] = ['file-storage', 'live-view', 'browser-pool', 'webhooks', 'run', 'gateway'];
/**
 * The order pins are counted in (`balancing: 'pinned'`): fixed, with services added later at the
 * end, so that a new service does not move the pins tests rely on (gateway 1 → browser-pool 1).
 */
const PIN_ORDER: ServiceName[] = ['file-storage', 'live-view', 'browser-pool', 'run', 'gateway', 'webhooks'];

/** A process the stack starts and restarts: a service, the child nats-server, the embedded database. */
export type ProcessName = ServiceName | 'nats' | 'database';

export const ENTRY: Record<ServiceName | 'database', string> = {
  'file-storage': 'services/file-storage/src/main',
  'live-view': 'services/live-view/src/main',
  'browser-pool': 'services/browser-pool/src/main',
  run: 'services/run/src/main',
  webhooks: 'services/webhooks/src/main',
  gateway: 'gateway/src/main',
  database: 'services/database/src/main',
};

/** A service's entry compiled by tsc. */
export function compiledEntry(entry: string): string {
  return path.join(ROOT, 'dist', `${entry}.js`);
}

/** The bundle scripts/bundle.ts makes beside a service's compiled entry. */
export function bundledEntry(entry: string): string {
  return path.join(ROOT, 'dist', `${entry}.bundle.mjs`);
}

/**
 * What runs a service built to dist/: its bundle (scripts/bundle.ts, a third of the CPU to load)
 * when the last build made one, else the compiled entry (a `tsc` alone leaves the bundle older).
 */
function distEntry(entry: string): string {
  const [js, bundle] = [compiledEntry(entry), bundledEntry(entry)];
  const bundleMs = fs.statSync(bundle, { throwIfNoEntry: false })?.mtimeMs;
  return bundleMs !== undefined && bundleMs >= (fs.statSync(js, { throwIfNoEntry: false })?.mtimeMs ?? 0) ? bundle : js;
}

/**
 * glibc's malloc for every process of the stack (a variable of the caller's own wins). By default
 * malloc raises its threshold for serving a large block from its own mapping each time such a
 * block is freed, so later large blocks (a file read whole, a WebAssembly module's bytes) come from
 * the heap and stay resident after they are freed; held at 128 KiB they are returned to the system.
 * The stack with no session held 10–19 MB less (the footprint bench).
 */
const MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: '131072' };

/**
 * V8 heap limits per service. Without them a Node process sizes its heap for the machine and lets
 * garbage pile up to that (young generation 3 × 16 MB, old generation growing towards ~2 GB before
 * it collects hard); with five services that is most of the idle footprint. A smaller young
 * generation costs a few more (cheap) scavenges, except where every screencast frame passes (the
 * pool's CDP relay, live-view's viewers and recorders): 2 MB there promotes frames that die young
 * into the old generation, and mark-sweeps follow on the loaded path; 8 MB. The old-generation caps sit far above what a
 * service holds under load (the run service holds transcripts and agent steps: more room), and a
 * process that reached one crashes and is restarted rather than swapping the node.
 */
export const HEAP_LIMIT_ARGS: Record<ServiceName | 'database', string[]> = {
  database: ['--max-semi-space-size=2', '--max-old-space-size=256'],
  'file-storage': ['--max-semi-space-size=2', '--max-old-space-size=256'],
  'live-view': ['--max-semi-space-size=8', '--max-old-space-size=384'],
  'browser-pool': ['--max-semi-space-size=8', '--max-old-space-size=512'],
  webhooks: ['--max-semi-space-size=2', '--max-old-space-size=256'],
  run: ['--max-semi-space-size=2', '--max-old-space-size=1024'],
  gateway: ['--max-semi-space-size=2', '--max-old-space-size=512'],
};

/** The public HTTP edges some services serve besides gRPC, and the variables that place them. */
export type Edge = 'files' | 'cdp' | 'liveView';
export const EDGES: Record<Edge, { service: ServiceName; host: string; port: string; url: string; defaultPort: number }> = {
  files: { service: 'file-storage', host: 'FILES_HTTP_HOST', port: 'FILES_HTTP_PORT', url: 'FILES_PUBLIC_URL', defaultPort: 8081 },
  liveView: { service: 'live-view', host: 'LIVE_VIEW_HTTP_HOST', port: 'LIVE_VIEW_HTTP_PORT', url: 'LIVE_VIEW_BASE_URL', defaultPort: 8082 },
  cdp: { service: 'browser-pool', host: 'CDP_HOST', port: 'CDP_PORT', url: 'CDP_PUBLIC_URL', defaultPort: 9222 },
};

/** Ports handed out by `freePort` in this process (never handed out twice). */
const handedOut = new Set<number>();

/**
 * Ports handed out by `freePort` in every process on this machine that shares the temporary
 * folder: a lock file per port in `<tmp>/ats-ports`, held for as long as the process that took the
 * port runs. Two test files side by side each start a stack: one picked a port the other had picked
 * and not yet bound, and its gateway's every call to live-view reached the other stack's service
 * (UNIMPLEMENTED, once in five runs of make test).
 */
export const PORT_LOCKS = path.join(os.tmpdir(), 'ats-ports');
const portLocks: LockFile[] = [];
process.once('exit', () => portLocks.forEach((l) => l.release()));
let portLocksDir: boolean | undefined;

/**
 * The lock on `port` for this process; false when another live process holds it; undefined when
 * the folder cannot be written (the bind check alone then decides).
 */
function reservePort(port: number): LockFile | false | undefined {
  try {
    portLocksDir ??= (fs.mkdirSync(PORT_LOCKS, { recursive: true }), true);
    const lock = acquireLock(path.join(PORT_LOCKS, String(port)));
    portLocks.push(lock);
    return lock;
  } catch (err) {
    return err instanceof LockHeldError ? false : undefined;
  }
}

function bindable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => {
      const bound = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(bound));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 (bound and released; fine for local launches and tests). It is
 * taken below the kernel's ephemeral range (32768 and up on Linux), which outgoing connections
 * draw their local ports from: between this call and the service binding the port, a connection
 * of some other process could otherwise take it, and the service would fail to listen.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (handedOut.has(port)) continue;
    const lock = reservePort(port);
    if (lock === false) continue;
    if ((await bindable(port)) !== undefined) return handedOut.add(port), port;
    lock?.release(); // another program has it
  }
  const port = (await bindable(0))!;
  handedOut.add(port);
  return port;
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

/**
 * Waits until a started process accepts connections on every port it serves, its public edge too:
 * a port it could not bind fails the start here, not a test later.
 */
function listening(what: string, ports: number[], child: ChildProcess): Promise<void> {
  // Generous: a process that died fails at once (waitFor watches it); one still starting on a
  // loaded machine (two stacks of six processes starting at once on two cores) took over 60 s.
  return waitFor(what, async () => (await Promise.all(ports.map((p) => canConnect('127.0.0.1', p)))).every(Boolean), 180_000, child);
}

/**
 * A stack stopped for good leaves no browser behind: the pools leave theirs running at SIGTERM for
 * a next process to take over (POOL_KEEP_BROWSERS_ON_EXIT), so their supervisors and Chromium
 * groups under `dataDir` are killed here.
 */
function killLeftBrowsers(dataDir: string): void {
  const marker = `${path.resolve(dataDir)}${path.sep}`;
  for (const name of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    let cmdline: string;
    try {
      cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmdline.includes(marker) || !/--user-data-dir=|supervisor\.pl/.test(cmdline)) continue;
    try {
      process.kill(-Number(name), 'SIGKILL'); // supervisors and Chromium leaders lead their groups
    } catch {
      /* not a group leader, or gone: its leader is killed too */
    }
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
export async function startNats(storeDir: string, onLine: (line: string) => void, again?: { port: number; token: string }): Promise<{ url: string; token: string; child: ChildProcess }> {
  // A restart keeps the port and token the services were given, so they reconnect on their own.
  const port = again?.port ?? (await freePort());
  fs.mkdirSync(storeDir, { recursive: true });
  const token = again?.token ?? randomBytes(24).toString('base64url');
  const conf = path.join(storeDir, 'auth.conf');
  fs.rmSync(conf, { force: true }); // a file of an earlier start may have other permissions
  fs.writeFileSync(conf, `authorization {\n  token: "${token}"\n}\n`, { mode: 0o600 });
  const child = spawn('nats-server', ['-c', conf, '-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const failed = new Promise<never>((_, reject) =>
    child.once('error', (err) => reject(new Error(`cannot start nats-server (${err.message}); install it (apt-get install nats-server) or set NATS_URL`))),
  );
  for (const s of [child.stdout!, child.stderr!]) readline.createInterface({ input: s }).on('line', onLine);
  try {
    await Promise.race([failed, waitFor('nats-server', () => canConnect('127.0.0.1', port), 15000, child)]);
  } catch (err) {
    killGroup(child.pid, 'SIGKILL'); // a server that never answered is not left holding the port
    throw err;
  }
  return { url: `nats://127.0.0.1:${port}`, token, child };
}

/**
 * How a supervised stack restarts a process that died: after a pause that doubles with each
 * crash in a row (from `firstDelayMs` up to `maxDelayMs`), forever; a process that stayed up
 * `stableMs` starts again from the first pause. Every restart is logged.
 */
export interface RestartPolicy {
  firstDelayMs?: number;
  maxDelayMs?: number;
  stableMs?: number;
  log(process: ProcessName, line: string): void;
  /** After a process came back (e.g. to record the new process ids). */
  onRestarted?(process: ProcessName): void;
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
  /** Postgres for every service; unset = the embedded database (a PGlite in DATA_DIR/database served by a process of its own). */
  databaseUrl?: string | undefined;
  /**
   * Without `databaseUrl`: `shared` (the default) starts the embedded database process, whose one
   * PGlite every service uses; `per-service` gives each service a PGlite of its own in
   * DATA_DIR/<service> (the older layout, kept for a data directory that already has it).
   */
  embeddedDatabase?: 'shared' | 'per-service';
  /** Runs after NATS and the database are up, before any service starts (e.g. to seed the database at `stack.databaseUrl`). */
  beforeServices?: (stack: Stack) => Promise<void>;
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
  onLine?: (service: ProcessName, line: string) => void;
  /** After a service process was spawned (e.g. to record its process group before it is ready). */
  onSpawn?: () => void;
  /** Extra environment for every service. */
  env?: Record<string, string>;
  /** Where file-storage keeps bytes: `local` (default) or `s3`, a bucket on an s3rver the stack starts in DATA_DIR/s3. */
  blobStore?: 'local' | 's3';
  shutdownTimeoutMs?: number;
  /**
   * Processes per service (default 1): one number for every service, or a count per service
   * (unnamed services: 1). With more, every service is given every replica's gRPC address
   * (`ipv4:a:p,b:p`), each replica its own ports and DATA_DIR (`<dataDir>/replica-<n>` from the
   * second on), and all share one generated SIGNING_SECRET and the internal token; live-view
   * replicas get distinct LIVE_VIEW_INSTANCE_IDs (`live-view-<n>`), browser-pool replicas their own
   * POOL_INSTANCE_IDs. Replicas share state only
   * through Postgres (`databaseUrl` is then required), NATS and what `env` configures (an object
   * store). Edge URLs name the first replica's ports.
   */
  replicas?: number | Partial<Record<ServiceName, number>>;
  /**
   * How a service's clients reach the replicas of another (with `replicas` > 1): `per-call` (the
   * default) lists every replica and spreads calls over them; `pinned` gives each process one
   * replica of each peer, as a per-connection balancer would, chosen so that the processes of one
   * service do not all use the same replica (replica r of the i-th service → replica
   * (r + i + j) mod n of the j-th), and calls cross from one replica to another.
   */
  balancing?: 'per-call' | 'pinned';
  /** Run each service with HEAP_LIMIT_ARGS (default true; false = Node's own sizing, for comparison in benchmarks). */
  heapLimits?: boolean;
}

/** The variable naming each process among its service's replicas (its leases, its browsers, its temporaries). */
const INSTANCE_ID_VARS: Partial<Record<ServiceName, string>> = { run: 'RUN_INSTANCE_ID', 'live-view': 'LIVE_VIEW_INSTANCE_ID', 'browser-pool': 'POOL_INSTANCE_ID', 'file-storage': 'FILES_INSTANCE_ID' };

/** How many processes of `service` the `replicas` option asks for. */
export function replicaCount(replicas: StackOptions['replicas'], service: ServiceName): number {
  return (typeof replicas === 'number' ? replicas : replicas?.[service]) ?? 1;
}

/** One replica of a service beyond the first: its process and ports. */
export interface Replica {
  service: ServiceName;
  /** 2, 3, …; the first replica is the stack's `children` entry. */
  n: number;
  /** Unset until it was started. */
  child?: ChildProcess;
  /** gRPC port, or the HTTP port of the gateway. */
  port: number;
  edgePorts: Map<Edge, number>;
}

/** A running stack. */
export class Stack {
  readonly opts: StackOptions;
  readonly children = new Map<ServiceName, ChildProcess>();
  readonly ports = new Map<ServiceName, number>();
  nats: ChildProcess | undefined;
  /** The embedded database process, when the stack runs one. */
  database: ChildProcess | undefined;
  /** What the services are given as DATABASE_URL (the embedded database's, or the one in the options); undefined = a PGlite each. */
  databaseUrl: string | undefined;
  /** The S3 server file-storage uses with `blobStore: 's3'`. */
  s3: S3Server | undefined;
  natsUrl = '';
  /** The token NATS requires (generated for a child nats-server); undefined = none. */
  natsToken: string | undefined;
  /** The credential every service requires of internal gRPC calls (for tests calling them directly). */
  readonly internalToken: InternalToken;
  gatewayPort = 0;
  readonly edgePorts = new Map<Edge, number>();
  /** Replicas beyond the first (the `replicas` option). */
  readonly replicas: Replica[] = [];
  readonly #signingSecret: string | undefined;
  #stopping = false;
  #policy: RestartPolicy | undefined;
  readonly #crashes = new Map<ProcessName, { inARow: number; startedAt: number }>();
  readonly #restartTimers = new Set<NodeJS.Timeout>();

  constructor(opts: StackOptions) {
    this.opts = opts;
    this.databaseUrl = opts.databaseUrl;
    // Resolved (and generated) here, before any service starts, so that they all read one file.
    this.internalToken = loadInternalToken({ internalToken: opts.internalToken, internalTokenFile: opts.internalTokenFile, dataDir: opts.dataDir });
    if (SERVICE_NAMES.some((s) => replicaCount(opts.replicas, s) > 1)) {
      if (!opts.databaseUrl) throw new Error('replicas share state through Postgres: give databaseUrl');
      this.#signingSecret = randomBytes(32).toString('base64url');
    }
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

  /** A gRPC target naming every replica of a service. */
  address(service: ServiceName): string {
    const more = this.replicas.filter((r) => r.service === service).map((r) => `127.0.0.1:${r.port}`);
    return more.length ? `ipv4:${[`127.0.0.1:${this.ports.get(service)}`, ...more].join(',')}` : `127.0.0.1:${this.ports.get(service)}`;
  }

  /** The one replica of `service` that replica `n` (1, 2, …) of `caller` is pinned to (`balancing: 'pinned'`). */
  pinnedAddress(caller: ServiceName, n: number, service: ServiceName): string {
    const ports = [this.ports.get(service)!, ...this.replicas.filter((r) => r.service === service).map((r) => r.port)];
    const i = (n - 1 + PIN_ORDER.indexOf(caller) + PIN_ORDER.indexOf(service)) % ports.length;
    return `127.0.0.1:${ports[i]}`;
  }

  #env(service: ServiceName, replica?: Replica): NodeJS.ProcessEnv {
    const addr = (s: ServiceName) => (this.opts.balancing === 'pinned' ? this.pinnedAddress(service, replica?.n ?? 1, s) : this.address(s));
    const env: NodeJS.ProcessEnv = {
      ...MALLOC_ENV,
      ...process.env,
      ...this.opts.env,
      DATA_DIR: replica ? path.join(this.opts.dataDir, `replica-${replica.n}`) : this.opts.dataDir,
      LOG_LEVEL: this.opts.logLevel ?? 'info',
      NATS_URL: this.natsUrl,
      GRPC_HOST: '127.0.0.1',
      RUN_SERVICE_ADDR: addr('run'),
      BROWSER_POOL_SERVICE_ADDR: addr('browser-pool'),
      FILE_STORAGE_SERVICE_ADDR: addr('file-storage'),
      LIVE_VIEW_SERVICE_ADDR: addr('live-view'),
      WEBHOOKS_SERVICE_ADDR: addr('webhooks'),
      SHUTDOWN_TIMEOUT_MS: String(this.opts.shutdownTimeoutMs ?? 10000),
    };
    delete env.BOOTSTRAP_API_KEY;
    for (const v of ['INTERNAL_TOKEN', 'INTERNAL_TOKEN_FILE', 'NATS_TOKEN']) delete env[v];
    if (this.opts.internalToken) env.INTERNAL_TOKEN = this.opts.internalToken;
    if (this.opts.internalTokenFile) env.INTERNAL_TOKEN_FILE = path.resolve(this.opts.internalTokenFile);
    if (this.#signingSecret) {
      if (!env.INTERNAL_TOKEN) env.INTERNAL_TOKEN_FILE ??= path.join(this.opts.dataDir, INTERNAL_TOKEN_FILE_NAME); // one token, whichever DATA_DIR
      env.SIGNING_SECRET = this.#signingSecret;
    }
    if (this.natsToken && service !== 'gateway') env.NATS_TOKEN = this.natsToken; // the gateway does not use NATS
    if (this.databaseUrl) env.DATABASE_URL = this.databaseUrl;
    else delete env.DATABASE_URL;
    // Replicas on one host share its name (every instance id's default): each gets its own, stable
    // across its restarts, as a pod name is (`<service>-<n>`), unless `env` names one.
    const idVar = INSTANCE_ID_VARS[service];
    if (idVar && replicaCount(this.opts.replicas, service) > 1 && !this.opts.env?.[idVar]) env[idVar] = `${service}-${replica?.n ?? 1}`;
    if (service === 'browser-pool' || service === 'webhooks') {
      // Browsers may open local sites, and webhooks (with loopback allowed) reach local receivers,
      // but no service's internal port.
      const natsPort = Number(new URL(this.natsUrl).port) || 4222;
      const servicePorts = [...this.ports.values(), ...this.edgePorts.values(), ...this.replicas.flatMap((r) => [r.port, ...r.edgePorts.values()])];
      const s3Port = this.s3 ? [Number(new URL(this.s3.endpoint).port)] : [];
      const variable = service === 'browser-pool' ? 'BROWSER_DENIED_PORTS' : 'WEBHOOK_DENIED_PORTS';
      env[variable] = [...new Set([...servicePorts, natsPort, ...s3Port, ...(this.opts.env?.[variable] ?? '').split(',').filter(Boolean).map(Number)])].join(',');
    }
    if (service === 'file-storage' && this.s3) Object.assign(env, this.s3.env());
    for (const [edge, e] of Object.entries(EDGES) as [Edge, (typeof EDGES)[Edge]][]) {
      // Every service learns every edge's URL (the pool puts live view URLs into records);
      // only the owner binds the port.
      env[e.url] = this.edgeUrl(edge);
      if (e.service === service) {
        env[e.host] = this.opts.gatewayHost ?? '127.0.0.1';
        env[e.port] = String((replica?.edgePorts ?? this.edgePorts).get(edge));
      }
    }
    const port = replica?.port ?? this.ports.get(service);
    if (service === 'gateway') {
      env.PORT = String(port);
      env.HOST = this.opts.gatewayHost ?? '127.0.0.1';
      env.BOOTSTRAP_API_KEY = this.opts.apiKey; // only the gateway ever sees the key
    } else {
      env.GRPC_PORT = String(port);
    }
    return env;
  }

  #spawn(service: ServiceName | 'database', replica?: Replica): ChildProcess {
    const entry = ENTRY[service];
    // From sources, the client package (the gateway's /mcp) is loaded from its sources too
    // (its package.json's `ats-source` condition), so no build of it is needed first.
    const heap = this.opts.heapLimits === false ? [] : HEAP_LIMIT_ARGS[service];
    const args = this.opts.mode === 'dist' ? [...heap, distEntry(entry)] : [...heap, '--import', 'tsx', '--conditions=ats-source', path.join(ROOT, `${entry}.ts`)];
    const env = service === 'database' ? this.#databaseEnv() : this.#env(service, replica);
    const child = spawn(process.execPath, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const s of [child.stdout!, child.stderr!]) readline.createInterface({ input: s }).on('line', (l) => this.opts.onLine?.(service, replica ? `[${replica.n}] ${l}` : l));
    queueMicrotask(() => this.opts.onSpawn?.()); // once the caller has put it in `children`
    return child;
  }

  /** The database process needs only where its data is: no service's address, token or secret. */
  #databaseEnv(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      DATA_DIR: this.opts.dataDir,
      LOG_LEVEL: this.opts.logLevel ?? 'info',
      SHUTDOWN_TIMEOUT_MS: String(this.opts.shutdownTimeoutMs ?? 10000),
      ...MALLOC_ENV,
      // One malloc arena: Postgres runs on the main thread, and the arenas of V8's helper threads
      // held 8–13 MB more.
      MALLOC_ARENA_MAX: '1',
    };
    for (const v of ['PGLITE_TEMPLATES', 'TMPDIR', 'DATABASE_IDLE_IN_TRANSACTION_MS']) {
      const value = this.opts.env?.[v] ?? process.env[v];
      if (value) env[v] = value;
    }
    return env;
  }

  /** Starts (or restarts) the embedded database process; resolves when its socket accepts connections. */
  async #startDatabase(): Promise<void> {
    if (this.#stopping) throw new Error('database: not started, the stack is stopping');
    const child = this.#spawn('database');
    this.database = child;
    this.#markStarted('database');
    child.once('exit', (code, signal) => {
      if (!this.#stopping && this.database === child) this.#scheduleRestart('database', `exited (code ${code}, signal ${signal})`);
    });
    await waitFor('database', () => embeddedDatabaseRunning(this.opts.dataDir), 180_000, child);
  }

  /** Starts (or restarts) one service and waits until its port accepts connections. */
  async startService(service: ServiceName): Promise<void> {
    // A stop that came while the stack was starting (Ctrl-C) would not see a process spawned after it.
    if (this.#stopping) throw new Error(`${service}: not started, the stack is stopping`);
    const child = this.#spawn(service);
    this.children.set(service, child);
    this.#markStarted(service);
    child.once('exit', (code, signal) => {
      if (this.#stopping || this.children.get(service) !== child) return;
      this.#scheduleRestart(service, `exited (code ${code}, signal ${signal})`);
    });
    const port = service === 'gateway' ? this.gatewayPort : this.ports.get(service)!;
    const edges = (Object.keys(EDGES) as Edge[]).filter((e) => EDGES[e].service === service).map((e) => this.edgePorts.get(e)!);
    await listening(service, [port, ...edges], child);
  }

  /** Starts NATS (unless given), the embedded database (unless `databaseUrl`) and every service; resolves when all accept connections. */
  async start(): Promise<void> {
    const nats = async () => {
      if (this.opts.natsUrl) {
        this.natsUrl = this.opts.natsUrl;
        this.natsToken = this.opts.natsToken;
      } else {
        const n = await startNats(path.join(this.opts.dataDir, 'nats'), (l) => this.opts.onLine?.('nats', l));
        this.natsUrl = n.url;
        this.natsToken = n.token;
        this.#watchNats(n.child);
      }
    };
    const database = async () => {
      if (this.opts.databaseUrl || this.opts.embeddedDatabase === 'per-service') return;
      if (hasPerServiceDatabases(this.opts.dataDir)) {
        this.opts.onLine?.('database', `${this.opts.dataDir} holds a database per service (the older layout): each service keeps its own`);
        return;
      }
      this.databaseUrl = embeddedDatabaseUrl(this.opts.dataDir);
      await this.#startDatabase();
    };
    try {
      // Both settle before a failure is acted on: a NATS (or database) still starting when the
      // other failed would otherwise be spawned after the stop below, and left running.
      const failed = (await Promise.allSettled([nats(), database()])).find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      await this.opts.beforeServices?.(this);
    } catch (err) {
      await this.stop();
      throw err;
    }
    if (this.opts.blobStore === 's3') this.s3 = await (await import('../services/file-storage/src/testing/s3-server.js')).startS3Server({ dir: path.join(this.opts.dataDir, 's3') });
    for (const s of SERVICE_NAMES) if (s !== 'gateway') this.ports.set(s, await freePort());
    this.gatewayPort = this.opts.gatewayPort ?? (await freePort());
    for (const edge of Object.keys(EDGES) as Edge[]) this.edgePorts.set(edge, this.opts.edgePorts?.[edge] ?? (await freePort()));
    this.ports.set('gateway', this.gatewayPort);
    const most = Math.max(...SERVICE_NAMES.map((s) => replicaCount(this.opts.replicas, s)));
    for (let n = 2; n <= most; n++) {
      for (const service of SERVICE_NAMES.filter((s) => replicaCount(this.opts.replicas, s) >= n)) {
        const edgePorts = new Map<Edge, number>();
        for (const edge of Object.keys(EDGES) as Edge[]) if (EDGES[edge].service === service) edgePorts.set(edge, await freePort());
        this.replicas.push({ service, n, port: await freePort(), edgePorts });
      }
    }
    try {
      const services = SERVICE_NAMES.filter((s) => s !== 'gateway');
      await Promise.all([...services.map((s) => this.startService(s)), ...this.replicas.filter((r) => r.service !== 'gateway').map((r) => this.#startReplica(r))]);
      await Promise.all([this.startService('gateway'), ...this.replicas.filter((r) => r.service === 'gateway').map((r) => this.#startReplica(r))]);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async #startReplica(r: Replica): Promise<void> {
    if (this.#stopping) throw new Error(`${r.service} replica ${r.n}: not started, the stack is stopping`);
    fs.mkdirSync(path.join(this.opts.dataDir, `replica-${r.n}`), { recursive: true });
    r.child = this.#spawn(r.service, r);
    await listening(`${r.service} replica ${r.n}`, [r.port, ...r.edgePorts.values()], r.child);
  }

  /** Restarts whatever dies from now on, per `policy`, until the stack stops. */
  supervise(policy: RestartPolicy): void {
    this.#policy = policy;
  }

  #markStarted(name: ProcessName): void {
    const c = this.#crashes.get(name);
    this.#crashes.set(name, { inARow: c?.inARow ?? 0, startedAt: Date.now() });
  }

  #watchNats(child: ChildProcess): void {
    this.nats = child;
    this.#markStarted('nats');
    child.once('exit', (code, signal) => {
      if (!this.#stopping && this.nats === child) this.#scheduleRestart('nats', `exited (code ${code}, signal ${signal})`);
    });
  }

  #scheduleRestart(name: ProcessName, why: string): void {
    const p = this.#policy;
    if (!p || this.#stopping) return;
    const c = this.#crashes.get(name) ?? { inARow: 0, startedAt: 0 };
    if (Date.now() - c.startedAt >= (p.stableMs ?? 60000)) c.inARow = 0;
    c.inARow++;
    this.#crashes.set(name, c);
    const delay = Math.min((p.firstDelayMs ?? 1000) * 2 ** (c.inARow - 1), p.maxDelayMs ?? 60000);
    p.log(name, `${why}; restart #${c.inARow} in ${delay / 1000} s`);
    const timer = setTimeout(() => {
      this.#restartTimers.delete(timer);
      if (!this.#stopping) void this.#restart(name);
    }, delay);
    this.#restartTimers.add(timer);
  }

  async #restart(name: ProcessName): Promise<void> {
    const p = this.#policy!;
    try {
      if (name === 'nats') {
        const n = await startNats(path.join(this.opts.dataDir, 'nats'), (l) => this.opts.onLine?.('nats', l), { port: Number(new URL(this.natsUrl).port), token: this.natsToken! });
        if (this.#stopping) return void (await stopChild(n.child, 5000));
        this.#watchNats(n.child);
      } else if (name === 'database') {
        await this.#startDatabase();
      } else {
        await this.startService(name);
      }
      p.log(name, 'restarted');
      p.onRestarted?.(name);
    } catch (err) {
      p.log(name, `restart failed: ${(err as Error).message}`);
      const child = name === 'nats' ? undefined : name === 'database' ? this.database : this.children.get(name);
      // A process that started but never listened is killed: its exit schedules the next try.
      if (child && child.exitCode === null && child.signalCode === null) killGroup(child.pid, 'SIGKILL');
      else if (!child || name === 'nats') this.#scheduleRestart(name, 'did not start');
    }
  }

  /**
   * Stops one service (replica `n`, 1 = the first) as it is not restarted: SIGKILL to its process
   * group at once, as a crash would, or SIGTERM, as a rolling update does (SIGKILL after the
   * shutdown time). Resolves when it exited.
   */
  async kill(service: ServiceName | 'database', n = 1, signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    let child: ChildProcess | undefined;
    if (service === 'database') {
      child = this.database;
      this.database = undefined;
    } else if (n > 1) {
      const replica = this.replicas.find((x) => x.service === service && x.n === n);
      child = replica?.child;
      if (replica) replica.child = undefined;
    } else {
      child = this.children.get(service);
      this.children.delete(service);
    }
    if (!child) return;
    if (signal === 'SIGTERM') return stopChild(child, (this.opts.shutdownTimeoutMs ?? 10000) + 2000);
    killGroup(child.pid, 'SIGKILL');
    await exited(child);
  }

  /** Starts again replica `n` (1 = the first) of a service that `kill` stopped; resolves when it listens. */
  async revive(service: ServiceName | 'database', n = 1): Promise<void> {
    if (service === 'database') return this.#startDatabase();
    if (n === 1) return this.startService(service);
    const replica = this.replicas.find((x) => x.service === service && x.n === n);
    if (!replica) throw new Error(`${service} has no replica ${n}`);
    await this.#startReplica(replica);
  }

  /** Process ids of everything the stack started. */
  pids(): number[] {
    return [...this.children.values(), ...this.replicas.map((r) => r.child), this.database, this.nats].flatMap((c) => (c?.pid ? [c.pid] : []));
  }

  /** Stops the gateway first, then the services, then the database, then NATS. Idempotent. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#restartTimers) clearTimeout(t);
    this.#restartTimers.clear();
    const grace = (this.opts.shutdownTimeoutMs ?? 10000) + 2000;
    const gw = this.children.get('gateway');
    const gateways = [gw, ...this.replicas.filter((r) => r.service === 'gateway').map((r) => r.child)].filter((c) => c !== undefined);
    await Promise.all(gateways.map((c) => stopChild(c, grace)));
    const rest = [...[...this.children.entries()].filter(([s]) => s !== 'gateway').map(([, c]) => c), ...this.replicas.filter((r) => r.service !== 'gateway').map((r) => r.child)];
    await Promise.all(rest.filter((c) => c !== undefined).map((c) => stopChild(c, grace)));
    this.children.clear();
    if (this.database) await stopChild(this.database, grace);
    killLeftBrowsers(this.opts.dataDir);
    if (this.nats) await stopChild(this.nats, 5000);
    await this.s3?.close();
  }
}
