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

/** The variables the browser-pool service reads (see the README table). */
export const browserPoolConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.browserPool),
  ...natsFields,
  ...grpcClientFields,
  ...outboxFields,
  fileStorageAddr: addressFields.fileStorageAddr,
  liveViewAddr: addressFields.liveViewAddr,
  chromiumPath: str('CHROMIUM_PATH', { default: '/usr/bin/chromium', describe: 'Chromium executable' }),
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
  warmSize: int('POOL_WARM_SIZE', { default: 2, min: 0, max: 64, describe: 'Launched, idle Chromium processes kept ready' }),
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

/** The browser-pool service's configuration from the environment. */
export function loadBrowserPoolConfig(env: Record<string, string | undefined> = process.env) {
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
  };
}

/** The parsed configuration. */
export type BrowserPoolConfig = ReturnType<typeof loadBrowserPoolConfig>;
