import fs from 'node:fs';
import os from 'node:os';
import {
  instanceId,
  instanceIdProblem,
  ConfigError,
  DEFAULT_PORTS,
  addressFields,
  commonFields,
  grpcClientFields,
  grpcFields,
  int,
  isHostPort,
  loadConfig,
  bool,
  natsFields,
  outboxFields,
  oneOf,
  optionalBool,
  optionalInt,
  optionalStr,
  optionalUrl,
  port,
  str,
  targetEndpoints,
} from '../../common/src/config.js';

/**
 * Debian's /usr/bin/chromium is a shell script that sources /etc/chromium.d before it starts the
 * binary: Google API keys and a client secret into the environment, an extension to load and flags
 * of its own (--enable-gpu-rasterization, --enable-remote-extensions, …), whatever a package or
 * an admin put there. Browsers start the binary itself, with only the flags and the environment
 * the pool gives them (and no shell, findmnt or ls before each launch).
 */
export const DEBIAN_CHROMIUM_BINARY = '/usr/lib/chromium/chromium';

/** CHROMIUM_PATH's default: Debian's binary where it is installed, else `/usr/bin/chromium`. */
export function defaultChromiumPath(exists: (file: string) => boolean = fs.existsSync): string {
  return exists(DEBIAN_CHROMIUM_BINARY) ? DEBIAN_CHROMIUM_BINARY : '/usr/bin/chromium';
}

/**
 * The warm pool's default floor: each idle warm Chromium holds ≈ 200 MB, which on a small machine
 * is a third of the stack's idle footprint; one still makes the first create fast.
 */
export function defaultWarmSize(cores: number, memoryBytes: number): number {
  return cores <= 2 || memoryBytes < 8 * 2 ** 30 ? 1 : 2;
}

/**
 * The warm pool's default ceiling: two per core, at most 8, never under the floor. Every warm
 * launch takes a core for a second or two from the browsers in use; on two cores a ceiling of 8
 * kept launching through a burst and slowed the browsers it was for.
 */
export function defaultWarmMax(cores: number, warmSize: number): number {
  return Math.max(warmSize, Math.min(8, 2 * cores));
}

/** The variables the browser-pool service reads (see the README table). */
export const browserPoolConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.browserPool),
  ...natsFields,
  ...grpcClientFields,
  ...outboxFields,
  fileStorageAddr: addressFields.fileStorageAddr,
  liveViewAddr: addressFields.liveViewAddr,
  chromiumPath: str('CHROMIUM_PATH', { default: defaultChromiumPath(), describe: `Chromium executable; default ${DEBIAN_CHROMIUM_BINARY} where it exists (Debian's binary, not its wrapper script), else /usr/bin/chromium` }),
  chromiumArgs: optionalStr('CHROMIUM_ARGS', { describe: 'Extra Chromium flags, separated by spaces' }),
  adblockLists: optionalStr('ADBLOCK_LISTS', { describe: "Filter list files of block_ads (Adblock Plus syntax), separated by commas; default: EasyList and EasyPrivacy of Debian's webext-ublock-origin-chromium" }),
  chromiumNoSandbox: optionalBool('CHROMIUM_NO_SANDBOX', { describe: "Run Chromium without its own sandbox; default: the sandbox is on wherever user namespaces work" }),
  browserConfinement: oneOf('BROWSER_CONFINEMENT', ['auto', 'off'] as const, {
    default: 'auto',
    describe: 'auto: each browser as its own uid in mount and PID namespaces, as far as this host allows; off: as this process (unsafe)',
  }),
  browserAllowPrivateNetworks: bool('BROWSER_ALLOW_PRIVATE_NETWORKS', {
    default: true,
    describe: "Browsers may open loopback and private addresses (local development); the services' internal ports and link-local addresses are refused either way",
  }),
  browserDeniedPorts: optionalStr('BROWSER_DENIED_PORTS', { describe: 'More ports browsers may not reach on this host, comma-separated' }),
  browserUidBase: int('BROWSER_UID_BASE', { default: 200000, min: 1000, max: 2 ** 31 - 20000, describe: 'First uid of the range browsers run as (when the pool runs as root)' }),
  warmSize: int('POOL_WARM_SIZE', { default: defaultWarmSize(os.availableParallelism(), os.totalmem()), min: 0, max: 64, describe: 'Launched, idle Chromium processes kept ready even without demand (the warm pool\'s floor); default 1 on a small machine (2 cores or fewer, or under 8 GiB), else 2' }),
  warmMax: optionalInt('POOL_WARM_MAX', { min: 0, max: 64, describe: 'Most warm browsers kept when creates come fast (the warm pool follows recent demand × launch time up to this); default two per core, at most 8, never under POOL_WARM_SIZE' }),
  warmWindowSeconds: int('POOL_WARM_WINDOW_SECONDS', { default: 30, min: 1, max: 3600, describe: 'Time constant of the demand average that sizes the warm pool: how fast it grows with a burst and shrinks back to the floor when idle' }),
  warmParallelLaunches: int('POOL_WARM_PARALLEL_LAUNCHES', { default: 2, min: 1, max: 16, describe: 'Warm browsers launched at once (launches are CPU-heavy; more would slow the browsers in use)' }),
  reuseSeconds: int('POOL_REUSE_SECONDS', {
    default: 30,
    min: 0,
    max: 3600,
    describe:
      "How long a stopped browser's Chromium is kept for its project's next browser (no proxy, stealth, default size), its session's browser context disposed so nothing of it carries over (each browser's pages then run in a browser context of their own); 0: every browser gets a Chromium of its own",
  }),
  parallelLaunches: int('POOL_PARALLEL_LAUNCHES', {
    default: 2 * os.availableParallelism(),
    min: 1,
    max: 64,
    describe: 'Chromium starts at once in this process, requested and warm (requests first); a burst beyond it queues, so each start finishes within its timeout instead of all starving together; default two per core',
  }),
  maxBrowsers: optionalInt('POOL_MAX_BROWSERS', {
    min: 1,
    max: 10000,
    describe: "Chromium processes this process runs at once (warm, active and still stopping); a launch beyond it waits for one to end; default one per 256 MiB of the machine's memory, at least 4",
  }),
  maxActivePerProject: int('MAX_ACTIVE_BROWSERS_PER_PROJECT', { default: 10, min: 1, max: 10000, describe: 'Active browsers per project; beyond it an idle session browser is reclaimed, else 429 (runs wait queued)' }),
  defaultTimeoutMinutes: int('BROWSER_DEFAULT_TIMEOUT_MINUTES', { default: 60, min: 1, max: 240, describe: 'Hard limit when a request gives none' }),
  idleTimeoutSeconds: int('BROWSER_IDLE_TIMEOUT_SECONDS', {
    default: 600,
    min: 0,
    max: 86400,
    describe: 'Stop a browser nobody has used (no CDP client, viewer, input or run) this long; 0 = never',
  }),
  reaperIntervalMs: int('BROWSER_REAPER_INTERVAL_MS', { default: 1000, min: 50, max: 60000, describe: 'How often timeouts and idleness are checked' }),
  defaultScreenWidth: int('DEFAULT_SCREEN_WIDTH', { default: 1280, min: 320, max: 3840, describe: 'Window width when a request gives none' }),
  defaultScreenHeight: int('DEFAULT_SCREEN_HEIGHT', { default: 800, min: 240, max: 2160, describe: 'Window height when a request gives none' }),
  proxies: optionalStr('PROXIES', { describe: 'JSON map of country code to proxy URL, e.g. {"de":"http://user:pass@host:3128"}' }),
  cdpHost: str('CDP_HOST', { default: '0.0.0.0', describe: 'Interface of the CDP proxy' }),
  cdpPort: port('CDP_PORT', { default: 9222, describe: 'Port of the CDP proxy' }),
  cdpPublicUrl: optionalUrl('CDP_PUBLIC_URL', ['http', 'https', 'ws', 'wss'], { describe: 'Base URL of the CDP proxy as clients reach it' }),
  cdpInternalUrl: optionalUrl('CDP_INTERNAL_URL', ['http', 'https', 'ws', 'wss'], {
    describe: 'Base URL of the CDP proxy as other services reach it (e.g. ws://browser-pool:9222); unset = the run service connects to Chromium directly on the same host',
  }),
  signingSecret: optionalStr('SIGNING_SECRET', { minLength: 32, describe: 'HMAC secret of CDP tokens' }),
  screencastQuality: int('SCREENCAST_QUALITY', { default: 60, min: 1, max: 100, describe: 'JPEG quality of live frames' }),
  screencastEveryNthFrame: int('SCREENCAST_EVERY_NTH_FRAME', { default: 1, min: 1, max: 60, describe: 'Send every n-th compositor frame' }),
  profileStateMaxBytes: int('PROFILE_STATE_MAX_BYTES', { default: 16 * 1024 * 1024, min: 1024, describe: 'Largest saved profile state (cookies + localStorage JSON)' }),
  downloadUrlTtlSeconds: int('BROWSER_DOWNLOAD_URL_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86400, describe: 'Lifetime of download links' }),
  instanceId: instanceId('POOL_INSTANCE_ID', "Names this pool process in the database (its browsers' owner); stable per pod (the pod name), so a restart finds its own leftovers"),
  advertiseGrpcAddr: optionalStr('POOL_ADVERTISE_GRPC_ADDR', { describe: "host:port of this process's gRPC server as other pool replicas reach it (Kubernetes: the pod IP); default 127.0.0.1:<bound port>" }),
  advertiseCdpUrl: optionalUrl('POOL_ADVERTISE_CDP_URL', ['ws', 'wss', 'http', 'https'], {
    describe: "Base URL of this process's CDP proxy as other pool replicas reach it (Kubernetes: ws://<pod IP>:9222); default ws://127.0.0.1:<bound port>",
  }),
  heartbeatIntervalMs: int('POOL_HEARTBEAT_INTERVAL_MS', { default: 5000, min: 50, max: 600000, describe: 'How often this process renews its heartbeat and looks for dead peers' }),
  heartbeatTimeoutMs: int('POOL_HEARTBEAT_TIMEOUT_MS', { default: 20000, min: 100, max: 3600000, describe: "A peer silent this long is dead: its browsers are recorded stopped (owner_lost)" }),
  drainTimeoutMs: optionalInt('POOL_DRAIN_TIMEOUT_MS', {
    min: 0,
    max: 3600000,
    describe: 'At SIGTERM, how long running browsers may go on (no new ones) before they are stopped; default half of SHUTDOWN_TIMEOUT_MS',
  }),
  keepBrowsersOnExit: bool('POOL_KEEP_BROWSERS_ON_EXIT', {
    default: true,
    describe:
      'Browsers outlive this process (each under a supervisor of its own): at SIGTERM they are left running, not drained, and the next process of the same DATA_DIR and POOL_INSTANCE_ID takes them over, as after a crash. false where a restart cannot find them (a pod replaced on another node)',
  }),
  browserNice: int('POOL_BROWSER_NICE', {
    default: 10,
    min: 0,
    max: 19,
    describe:
      'Chromium and its supervisor run this much nicer than the services (Unix nice), so API, live view and recording answers keep their CPU while browsers start or work hard; 0 = the same priority',
  }),
  browserCpuShares: int('POOL_BROWSER_CPU_SHARES', {
    default: 256,
    min: 0,
    max: 262144,
    describe:
      "Every browser of the pool runs in one cgroup (v1 cpu, where the pool runs as root); while several browsers launch at once the group weighs this much against each service thread's 1024, so a burst never starves the services (otherwise 4096); idle services leave the browsers all the CPU; 0 = no cgroup (nice alone)",
  }),
  restartGraceMs: int('POOL_RESTART_GRACE_MS', {
    default: 60000,
    min: 1000,
    max: 3600000,
    describe:
      'With POOL_KEEP_BROWSERS_ON_EXIT: how long a browser waits for a pool process to take it over before its supervisor ends it, and how long peers wait before a refusing replica is taken for dead (its heartbeat timeout still applies)',
  }),
};

/** The liveness and drain settings, checked against each other. */
function instanceSettings(c: { instanceId: string; advertiseGrpcAddr: string | undefined; heartbeatIntervalMs: number; heartbeatTimeoutMs: number; drainTimeoutMs: number | undefined; shutdownTimeoutMs: number }) {
  const problems = [instanceIdProblem('POOL_INSTANCE_ID', c.instanceId)].filter((p) => p !== undefined);
  if (c.advertiseGrpcAddr !== undefined && !isHostPort(c.advertiseGrpcAddr)) problems.push(`POOL_ADVERTISE_GRPC_ADDR must be host:port (got ${JSON.stringify(c.advertiseGrpcAddr)})`);
  if (c.heartbeatTimeoutMs < 2 * c.heartbeatIntervalMs) problems.push('POOL_HEARTBEAT_TIMEOUT_MS must be at least twice POOL_HEARTBEAT_INTERVAL_MS (one late heartbeat is not a death)');
  const drainTimeoutMs = c.drainTimeoutMs ?? Math.floor(c.shutdownTimeoutMs / 2);
  if (drainTimeoutMs >= c.shutdownTimeoutMs) problems.push('POOL_DRAIN_TIMEOUT_MS must be shorter than SHUTDOWN_TIMEOUT_MS (browsers are stopped, profiles saved, after the drain)');
  if (problems.length) throw new ConfigError(problems);
  return { drainTimeoutMs };
}

/** A proxy per lower-case country code, from PROXIES (JSON) and PROXY_<CC> variables. */
export function parseProxies(json: string | undefined, env: Record<string, string | undefined>): Map<string, URL> {
  const out = new Map<string, URL>();
  const problems: string[] = [];
  const add = (cc: string, raw: unknown, from: string) => {
    if (!/^[a-z]{2}$/.test(cc)) return problems.push(`${from}: ${JSON.stringify(cc)} is not a two-letter country code`);
    let u: URL;
    try {
      u = new URL(String(raw));
    } catch {
      return problems.push(`${from}: the proxy of ${cc} is not a URL`);
    }
    if (!['http:', 'https:', 'socks4:', 'socks5:'].includes(u.protocol)) return problems.push(`${from}: the proxy of ${cc} must be http, https, socks4 or socks5`);
    if (u.username && !['http:', 'https:'].includes(u.protocol)) return problems.push(`${from}: the proxy of ${cc} has credentials, which only http and https proxies support`);
    return out.set(cc, u);
  };
  if (json) {
    let map: unknown;
    try {
      map = JSON.parse(json);
    } catch {
      throw new ConfigError(['PROXIES must be a JSON object of country code to proxy URL']);
    }
    if (!map || typeof map !== 'object' || Array.isArray(map)) throw new ConfigError(['PROXIES must be a JSON object of country code to proxy URL']);
    for (const [cc, u] of Object.entries(map)) add(cc.toLowerCase(), u, 'PROXIES');
  }
  for (const [k, v] of Object.entries(env)) {
    const m = /^PROXY_([A-Z]{2})$/.exec(k);
    if (m && v) add(m[1]!.toLowerCase(), v, k);
  }
  if (problems.length) throw new ConfigError(problems);
  return out;
}

/** `http(s)://host` → `ws(s)://host`: cdpUrl is a WebSocket URL. */
export function toWebSocketBase(u: string): string {
  return u.replace(/^http(s?):\/\//, 'ws$1://').replace(/\/+$/, '');
}

/** host:port of a URL (default port when it has none). */
function endpointOf(raw: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(raw);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) || defaultPort };
}

/**
 * What browsers may not reach: every internal port of the services on this host (gRPC, NATS,
 * Postgres, the CDP proxy, extra ports), and those services wherever else they run.
 */
function browserEgress(c: {
  browserAllowPrivateNetworks: boolean;
  browserDeniedPorts: string | undefined;
  grpcPort: number;
  cdpPort: number;
  fileStorageAddr: string;
  liveViewAddr: string;
  natsUrl: string;
  databaseUrl: string | undefined;
}) {
  const extra = (c.browserDeniedPorts ?? '').split(',').map((p) => p.trim()).filter(Boolean);
  const bad = extra.filter((p) => !/^\d{1,5}$/.test(p) || Number(p) > 65535);
  if (bad.length) throw new ConfigError([`BROWSER_DENIED_PORTS must be port numbers separated by commas (got ${JSON.stringify(bad.join(','))})`]);
  const services = [
    ...targetEndpoints(c.fileStorageAddr),
    ...targetEndpoints(c.liveViewAddr),
    endpointOf(c.natsUrl, 4222),
    endpointOf(c.databaseUrl ?? 'postgres://127.0.0.1:5432', 5432),
  ];
  const deniedLocalPorts = [...new Set([...Object.values(DEFAULT_PORTS), 4222, 5432, c.grpcPort, c.cdpPort, ...services.map((e) => e.port), ...extra.map(Number)])].filter((p) => p > 0);
  return { allowPrivateNetworks: c.browserAllowPrivateNetworks, deniedLocalPorts, deniedEndpoints: services };
}

/** Memory a browser is assumed to take when POOL_MAX_BROWSERS is not set. */
const MEMORY_PER_BROWSER = 256 * 1024 * 1024;

/** The warm pool's ceiling and the node's capacity, checked against each other. */
function capacitySettings(c: { warmSize: number; warmMax: number | undefined; maxBrowsers: number | undefined }, totalMemory: number, cores: number) {
  const warmMax = c.warmMax ?? defaultWarmMax(cores, c.warmSize);
  const maxBrowsers = c.maxBrowsers ?? Math.max(4, Math.floor(totalMemory / MEMORY_PER_BROWSER));
  const problems: string[] = [];
  if (warmMax < c.warmSize) problems.push('POOL_WARM_MAX must be at least POOL_WARM_SIZE (the ceiling of the warm pool is above its floor)');
  if (problems.length) throw new ConfigError(problems);
  return { warmMax, maxBrowsers };
}

/** The browser-pool service's configuration from the environment. */
export function loadBrowserPoolConfig(env: Record<string, string | undefined> = process.env, totalMemory = os.totalmem(), cores = os.availableParallelism()) {
  const c = loadConfig(browserPoolConfigSpec, env);
  return {
    ...c,
    chromiumArgs: c.chromiumArgs ? c.chromiumArgs.split(/\s+/).filter(Boolean) : [],
    adblockLists: c.adblockLists ? c.adblockLists.split(',').map((f) => f.trim()).filter(Boolean) : undefined,
    egress: browserEgress(c),
    proxies: parseProxies(c.proxies, env),
    cdpWsBase: toWebSocketBase(c.cdpPublicUrl ?? `http://localhost:${c.cdpPort}`),
    cdpInternalBase: c.cdpInternalUrl ? toWebSocketBase(c.cdpInternalUrl) : undefined,
    advertiseCdpUrl: c.advertiseCdpUrl ? toWebSocketBase(c.advertiseCdpUrl) : undefined,
    ...instanceSettings(c),
    ...capacitySettings(c, totalMemory, cores),
  };
}

/** The parsed configuration. */
export type BrowserPoolConfig = ReturnType<typeof loadBrowserPoolConfig>;
