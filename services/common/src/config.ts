/**
 * Typed configuration parsed once from the environment. Each service declares a spec of
 * fields; `loadConfig` returns a typed object or throws a ConfigError naming every bad
 * variable. Nothing outside config modules reads `process.env`.
 */
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';

/** One configuration field: the variable it reads and how to parse it. */
export interface Field<T> {
  readonly env: string;
  readonly describe: string;
  /** `source` is every variable (when loadConfig parses), for a default that depends on another one. */
  parse(raw: string | undefined, source?: Record<string, string | undefined>): T;
}

/** Raised when one or more variables are missing or malformed. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration: ${problems.join('; ')}`);
    this.name = this.constructor.name;
    this.problems = problems;
  }
}

/** Thrown by a field parser: the message names the variable and what is wrong. */
export class FieldProblem extends Error {}

type Opt<T> = { default?: T; describe?: string };

function field<T>(env: string, describe: string, parse: (raw: string | undefined) => T): Field<T> {
  return { env, describe, parse };
}

function required<T>(env: string, raw: string | undefined, fallback: T | undefined): string | T {
  if (raw === undefined || raw === '') {
    if (fallback === undefined) throw new FieldProblem(`${env} is required`);
    return fallback;
  }
  return raw;
}

/** A string; required unless a default is given. */
export function str(env: string, opt: Opt<string> = {}): Field<string> {
  return field(env, opt.describe ?? '', (raw) => required(env, raw, opt.default) as string);
}

/** An instance id: a pod name fits (letters, digits, `.`, `_`, `-`); it names folders and rows and travels in headers. */
export const INSTANCE_ID = /^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$/;

/**
 * The name of this process among the replicas of its service; `describe` says what it names.
 * Checked with `instanceIdProblem` beside the service's other cross-checks, so one error names
 * every variable at fault. Set, it wins; unset, it is `defaultInstanceId` of DATA_DIR.
 */
export function instanceId(env: string, describe: string): Field<string> {
  return { env, describe: `${describe}; default <host name>-<hash of DATA_DIR>`, parse: (raw, source) => raw || defaultInstanceId(source?.DATA_DIR || './data') };
}

/**
 * The host name (the pod name in Kubernetes) and a short hash of the resolved data directory:
 * stable across restarts of one stack (its leftovers are found again), and different for two
 * stacks on one host with their own DATA_DIRs, which would otherwise take each other's leases,
 * browsers and temporaries for their own.
 */
export function defaultInstanceId(dataDir: string): string {
  return `${os.hostname()}-${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 8)}`;
}

/** What is wrong with an instance id, naming its variable; undefined when it is fine. */
export function instanceIdProblem(env: string, v: string): string | undefined {
  return INSTANCE_ID.test(v) ? undefined : `${env} must be 1 to 128 letters, digits, '.', '_' or '-', e.g. the pod name (got ${JSON.stringify(v)})`;
}

/** A string that may be absent (undefined). */
export function optionalStr(env: string, opt: { describe?: string; minLength?: number } = {}): Field<string | undefined> {
  return field(env, opt.describe ?? '', (raw) => {
    if (raw === undefined || raw === '') return undefined;
    if (opt.minLength && raw.length < opt.minLength) {
      throw new FieldProblem(`${env} must be at least ${opt.minLength} characters`);
    }
    return raw;
  });
}

/** An integer within [min, max]. */
export function int(env: string, opt: Opt<number> & { min?: number; max?: number } = {}): Field<number> {
  const min = opt.min ?? Number.MIN_SAFE_INTEGER;
  const max = opt.max ?? Number.MAX_SAFE_INTEGER;
  return field(env, opt.describe ?? '', (raw) => {
    const v = required(env, raw, opt.default);
    if (typeof v === 'number') return v;
    if (!/^-?\d+$/.test(v.trim()) || Number(v) < min || Number(v) > max) {
      throw new FieldProblem(`${env} must be an integer between ${min} and ${max} (got ${JSON.stringify(v)})`);
    }
    return Number(v);
  });
}

/** An integer within [min, max] that may be absent (undefined: the caller decides). */
export function optionalInt(env: string, opt: { describe?: string; min?: number; max?: number } = {}): Field<number | undefined> {
  const parse = int(env, opt).parse;
  return field(env, opt.describe ?? '', (raw) => (raw === undefined || raw === '' ? undefined : parse(raw)));
}

/** A TCP port, 0..65535 (0 = pick a free one). */
export function port(env: string, opt: Opt<number> = {}): Field<number> {
  return int(env, { ...opt, min: 0, max: 65535 });
}

/** A boolean: true/false/1/0/yes/no. */
export function bool(env: string, opt: Opt<boolean> = {}): Field<boolean> {
  return field(env, opt.describe ?? '', (raw) => {
    const v = required(env, raw, opt.default);
    if (typeof v === 'boolean') return v;
    const s = v.trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(s)) return true;
    if (['0', 'false', 'no', 'off'].includes(s)) return false;
    throw new FieldProblem(`${env} must be true or false (got ${JSON.stringify(v)})`);
  });
}

/** A boolean that may be absent (undefined: the caller decides). */
export function optionalBool(env: string, opt: { describe?: string } = {}): Field<boolean | undefined> {
  const parse = bool(env, { default: false }).parse;
  return field(env, opt.describe ?? '', (raw) => (raw === undefined || raw === '' ? undefined : parse(raw)));
}

/** One of a fixed set of values. */
export function oneOf<const T extends string>(env: string, values: readonly T[], opt: Opt<T> = {}): Field<T> {
  return field(env, opt.describe ?? '', (raw) => {
    const v = required(env, raw, opt.default);
    if (!values.includes(v as T)) {
      throw new FieldProblem(`${env} must be one of ${values.join(', ')} (got ${JSON.stringify(v)})`);
    }
    return v as T;
  });
}

/** A URL with one of the given protocols. */
export function url(env: string, protocols: string[], opt: Opt<string> = {}): Field<string> {
  return field(env, opt.describe ?? '', (raw) => {
    const v = required(env, raw, opt.default);
    let parsed: URL;
    try {
      parsed = new URL(v);
    } catch {
      throw new FieldProblem(`${env} must be a URL (${protocols.join(', ')})`);
    }
    if (!protocols.includes(parsed.protocol.replace(/:$/, ''))) {
      throw new FieldProblem(`${env} must use ${protocols.join(' or ')}`);
    }
    return v.replace(/\/+$/, '');
  });
}

/** A URL that may be absent; never echoed in errors (it may hold credentials). */
export function optionalUrl(env: string, protocols: string[], opt: { describe?: string } = {}): Field<string | undefined> {
  const inner = url(env, protocols, opt);
  return field(env, opt.describe ?? '', (raw) => (raw === undefined || raw === '' ? undefined : inner.parse(raw)));
}

const HOST_PORT = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;
const IP_LIST = /^(ipv4|ipv6):(.+)$/;

/** True for `host:port` (a name, an IPv4 address or a bracketed IPv6 address, and a port). */
export function isHostPort(v: string): boolean {
  const m = HOST_PORT.exec(v);
  return !!m && Number(m[2]) <= 65535;
}

/** Every host:port a gRPC target (as `address` accepts it) names; `[]` for anything else. */
export function targetEndpoints(target: string): { host: string; port: number }[] {
  const dns = /^dns:(?:\/\/[^/]*\/)?(.+)$/.exec(target);
  const list = IP_LIST.exec(target);
  const parts = dns ? [dns[1]!] : list ? list[2]!.split(',') : [target];
  return parts.flatMap((p) => {
    const m = HOST_PORT.exec(p.trim());
    return m ? [{ host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) }] : [];
  });
}

/**
 * The address of another service, as a gRPC target: `host:port` (one connection, to whatever
 * the name resolves to first), `dns:///host:port` (every address the name resolves to, e.g. a
 * headless Service; calls are spread over them), or `ipv4:a:p,b:p` / `ipv6:[a]:p,[b]:p` (a
 * fixed list of replicas).
 */
export function address(env: string, opt: Opt<string> = {}): Field<string> {
  return field(env, opt.describe ?? '', (raw) => {
    const v = required(env, raw, opt.default).trim();
    const dns = /^dns:(?:\/\/[^/]*\/)?(.+)$/.exec(v);
    const list = IP_LIST.exec(v);
    const ok = dns ? isHostPort(dns[1]!) : list ? list[2]!.split(',').every(isHostPort) : isHostPort(v);
    if (!ok) throw new FieldProblem(`${env} must be host:port, dns:///host:port or ipv4:host:port,host:port (got ${JSON.stringify(v)})`);
    return v;
  });
}

/** A directory path, resolved against the working directory. */
export function dir(env: string, opt: Opt<string> = {}): Field<string> {
  return field(env, opt.describe ?? '', (raw) => path.resolve(required(env, raw, opt.default) as string));
}

type Parsed<S> = { [K in keyof S]: S[K] extends Field<infer T> ? T : never };

/** Parses every field of `spec`; throws one ConfigError listing all problems. */
export function loadConfig<S extends Record<string, Field<unknown>>>(
  spec: S,
  source: Record<string, string | undefined> = process.env,
): Parsed<S> {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, f] of Object.entries(spec)) {
    try {
      out[key] = f.parse(source[f.env], source);
    } catch (err) {
      if (err instanceof FieldProblem) problems.push(err.message);
      else throw err;
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return out as Parsed<S>;
}

/** Fields every service process shares. */
export const commonFields = {
  logLevel: oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], {
    default: 'info',
    describe: 'pino log level',
  }),
  dataDir: dir('DATA_DIR', { default: './data', describe: 'Where local state lives (PGlite databases, files)' }),
  databaseUrl: optionalUrl('DATABASE_URL', ['postgres', 'postgresql'], {
    describe: 'Postgres URL; unset = embedded PGlite in DATA_DIR/<service>',
  }),
  shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', { default: 10000, min: 100, max: 600000, describe: 'Bound on graceful shutdown' }),
  // Resolved by loadInternalToken (internal-token.ts): unset both = DATA_DIR/internal-token.
  internalToken: optionalStr('INTERNAL_TOKEN', { minLength: 32, describe: 'Credential every internal gRPC call carries and every server checks' }),
  internalTokenFile: optionalStr('INTERNAL_TOKEN_FILE', { describe: 'A file holding INTERNAL_TOKEN (e.g. a mounted Secret)' }),
} as const;

/**
 * Where PGlite's pristine data directory is kept for copying into new ones (pglite-template.ts):
 * PGLITE_TEMPLATES, else DATA_DIR/.pglite-templates. Read where a database opens rather than in
 * each service's config, since tests open databases without one; `make test` points every
 * process at one folder so the whole run builds the template once.
 */
export function pgliteTemplatesDir(dataDir: string, source: Record<string, string | undefined> = process.env): string {
  const raw = source.PGLITE_TEMPLATES;
  return raw ? path.resolve(raw) : path.join(dataDir, '.pglite-templates');
}

/** Fields of a process that serves gRPC. */
export function grpcFields(defaultPort: number) {
  return {
    grpcHost: str('GRPC_HOST', { default: '127.0.0.1', describe: 'Interface the gRPC server binds' }),
    grpcPort: port('GRPC_PORT', { default: defaultPort, describe: 'gRPC port' }),
  } as const;
}

/** Default addresses of the four services (used when the *_SERVICE_ADDR variables are unset). */
export const DEFAULT_PORTS = {
  run: 50051,
  browserPool: 50052,
  fileStorage: 50053,
  liveView: 50054,
  webhooks: 50055,
} as const;

export const addressFields = {
  runAddr: address('RUN_SERVICE_ADDR', { default: `127.0.0.1:${DEFAULT_PORTS.run}` }),
  browserPoolAddr: address('BROWSER_POOL_SERVICE_ADDR', { default: `127.0.0.1:${DEFAULT_PORTS.browserPool}` }),
  fileStorageAddr: address('FILE_STORAGE_SERVICE_ADDR', { default: `127.0.0.1:${DEFAULT_PORTS.fileStorage}` }),
  liveViewAddr: address('LIVE_VIEW_SERVICE_ADDR', { default: `127.0.0.1:${DEFAULT_PORTS.liveView}` }),
  webhooksAddr: address('WEBHOOKS_SERVICE_ADDR', { default: `127.0.0.1:${DEFAULT_PORTS.webhooks}` }),
} as const;

/** How a service that records webhook events hands them to the webhooks service (its outbox relay). */
export const outboxFields = {
  webhooksAddr: addressFields.webhooksAddr,
  outboxPollMs: int('WEBHOOK_OUTBOX_POLL_MS', { default: 1000, min: 20, max: 60000, describe: 'Fallback poll of the webhook outbox (a commit wakes the relay first); also the pause after the webhooks service failed' }),
} as const;

export const natsFields = {
  natsUrl: url('NATS_URL', ['nats', 'tls', 'ws', 'wss'], { default: 'nats://127.0.0.1:4222', describe: 'NATS server' }),
  natsToken: optionalStr('NATS_TOKEN', { describe: 'Token the NATS server requires; unset = connect without credentials' }),
} as const;

export const grpcClientFields = {
  grpcDeadlineMs: int('GRPC_DEADLINE_MS', { default: 5000, min: 50, max: 600000, describe: 'Deadline of every unary gRPC call' }),
} as const;
