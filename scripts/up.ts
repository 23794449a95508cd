/**
 * `make up`: runs the whole service locally on embedded defaults (PGlite, local files, a child
 * nats-server unless NATS_URL is set), prints the API URL and a key, and stops everything on
 * Ctrl-C or SIGTERM. `--detach` runs it in the background (`make down` stops it).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { dir, int, loadConfig, oneOf, optionalStr, optionalUrl, port, str } from '../services/common/src/config.js';
import { EDGES, ROOT, SERVICE_NAMES, Stack, killGroup } from './stack.js';

const config = loadConfig({
  dataDir: dir('DATA_DIR', { default: './data' }),
  natsUrl: optionalUrl('NATS_URL', ['nats', 'tls']),
  natsToken: optionalStr('NATS_TOKEN'),
  internalToken: optionalStr('INTERNAL_TOKEN', { minLength: 32 }),
  internalTokenFile: optionalStr('INTERNAL_TOKEN_FILE'),
  databaseUrl: optionalUrl('DATABASE_URL', ['postgres', 'postgresql']),
  host: str('HOST', { default: '0.0.0.0' }),
  port: port('PORT', { default: 8080 }),
  filesPort: port('FILES_HTTP_PORT', { default: EDGES.files.defaultPort }),
  filesUrl: optionalUrl('FILES_PUBLIC_URL', ['http', 'https']),
  liveViewPort: port('LIVE_VIEW_HTTP_PORT', { default: EDGES.liveView.defaultPort }),
  liveViewUrl: optionalUrl('LIVE_VIEW_BASE_URL', ['http', 'https']),
  cdpPort: port('CDP_PORT', { default: EDGES.cdp.defaultPort }),
  cdpUrl: optionalUrl('CDP_PUBLIC_URL', ['http', 'https', 'ws', 'wss']),
  publicUrl: optionalUrl('PUBLIC_URL', ['http', 'https']),
  apiKey: optionalStr('BOOTSTRAP_API_KEY', { minLength: 20 }),
  logLevel: oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], { default: 'info' }),
  shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', { default: 10000, min: 100, max: 600000 }),
  mode: oneOf('ATS_RUN_MODE', ['dist', 'tsx'], { default: 'dist' }),
  noColor: optionalStr('NO_COLOR'),
});

const pidFile = path.join(config.dataDir, 'up.pid');
const readyFile = path.join(config.dataDir, 'up.ready');
const logFile = path.join(config.dataDir, 'up.log');
const keyFile = path.join(config.dataDir, 'local-api-key');

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The local key: BOOTSTRAP_API_KEY, else the one kept in DATA_DIR, else a new one. */
function localKey(): string {
  if (config.apiKey) return config.apiKey;
  try {
    const k = fs.readFileSync(keyFile, 'utf8').trim();
    if (k) return k;
  } catch {
    /* first start */
  }
  const key = `ats_${randomBytes(24).toString('base64url')}`;
  fs.writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
  return key;
}

const COLORS: Record<string, number> = { 'file-storage': 36, 'live-view': 35, 'browser-pool': 33, run: 32, gateway: 34, nats: 90, database: 90 };
const color = process.stdout.isTTY && !config.noColor;
const width = Math.max(...[...SERVICE_NAMES, 'nats', 'database'].map((s) => s.length));

/** Prints a child's line with its name; pino JSON becomes `LEVEL msg key=value …`. */
function printLine(service: string, line: string): void {
  let text = line;
  if (line.startsWith('{')) {
    try {
      const { level, msg, time: _t, service: _s, pid: _p, hostname: _h, ...rest } = JSON.parse(line) as Record<string, unknown>;
      const extra = Object.entries(rest)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(' ');
      text = `${String(level ?? '').toUpperCase().padEnd(5)} ${msg ?? ''}${extra ? ` ${extra}` : ''}`;
    } catch {
      /* not JSON after all */
    }
  }
  const name = service.padEnd(width);
  out(color ? `\x1b[${COLORS[service] ?? 0}m${name}\x1b[0m | ${text}` : `${name} | ${text}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops a launcher left running in the background, and any process group it recorded. */
async function stopPrevious(): Promise<boolean> {
  let rec: { pid: number; groups: number[] };
  try {
    rec = JSON.parse(fs.readFileSync(pidFile, 'utf8'));
  } catch {
    return false;
  }
  if (alive(rec.pid)) {
    process.kill(rec.pid, 'SIGTERM');
    for (let i = 0; i < 300 && alive(rec.pid); i++) await new Promise((r) => setTimeout(r, 100));
  }
  for (const g of rec.groups ?? []) killGroup(g, 'SIGKILL'); // leftovers of a launcher that was killed hard
  fs.rmSync(pidFile, { force: true });
  return true;
}

function banner(baseUrl: string, key: string): void {
  out('');
  out('Agent Task Service is up.');
  out(`  Dashboard: ${baseUrl}/  (open it and sign in with the API key)`);
  out(`  API:       ${baseUrl}/api/v1`);
  out(`  API key:   ${key}`);
  out(`  Health:    ${baseUrl}/healthz    OpenAPI: ${baseUrl}/openapi.json`);
  out(`  Try:       curl -H "X-Service-API-Key: ${key}" ${baseUrl}/api/v1/agents`);
  out('');
}

async function up(): Promise<void> {
  fs.mkdirSync(config.dataDir, { recursive: true });
  await stopPrevious();
  const key = localKey();
  const stack = new Stack({
    dataDir: config.dataDir,
    natsUrl: config.natsUrl,
    natsToken: config.natsToken,
    internalToken: config.internalToken,
    internalTokenFile: config.internalTokenFile,
    databaseUrl: config.databaseUrl,
    gatewayHost: config.host,
    gatewayPort: config.port,
    edgePorts: { files: config.filesPort, liveView: config.liveViewPort, cdp: config.cdpPort },
    edgeUrls: { files: config.filesUrl, liveView: config.liveViewUrl, cdp: config.cdpUrl },
    apiKey: key,
    logLevel: config.logLevel,
    mode: config.mode,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    // Local development: a webhook receiver on this machine (loopback) is allowed; the Kubernetes overlays do not allow it.
    env: { WEBHOOK_ALLOW_LOOPBACK: 'true' },
    onLine: printLine,
    // Recorded from the first spawn on: a launcher killed hard while starting leaves groups `make down` (or the next start) can stop.
    onSpawn: () => record(),
  });
  // Written whole (rename), so `make down` or a reader never sees a half-written file.
  const record = () => {
    fs.writeFileSync(`${pidFile}.tmp`, JSON.stringify({ pid: process.pid, groups: stack.pids() }));
    fs.renameSync(`${pidFile}.tmp`, pidFile);
  };
  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    out(`\nStopping (${signal})…`);
    await stack.stop();
    fs.rmSync(pidFile, { force: true });
    fs.rmSync(readyFile, { force: true });
    out('Stopped.');
    process.exit(0);
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => void shutdown(sig));
  // A failure of the launcher itself stops what it started instead of leaving it running.
  process.on('uncaughtException', (err) => {
    process.stderr.write(`make up: ${err.stack ?? err.message}\n`);
    void shutdown('error');
  });

  // A process that dies (a service or the nats-server) is restarted with growing pauses, forever,
  // so a crash does not take the rest down; each restart is logged.
  stack.supervise({ firstDelayMs: 1000, maxDelayMs: 30000, stableMs: 60000, log: printLine, onRestarted: record });

  try {
    await stack.start();
  } catch (err) {
    process.stderr.write(`make up: ${(err as Error).message}\n`);
    await stack.stop();
    fs.rmSync(pidFile, { force: true });
    process.exit(1);
  }
  record();
  const healthy = await fetch(`${stack.baseUrl}/healthz`).then((r) => r.ok, () => false);
  if (!healthy) out('warning: /healthz does not report every service serving yet');
  const shown = config.publicUrl ?? `http://localhost:${stack.gatewayPort}`;
  banner(shown, key);
  fs.writeFileSync(readyFile, JSON.stringify({ url: shown, key }), { mode: 0o600 });
}

/** Starts `up` in the background with its output in DATA_DIR/up.log; returns once it is ready. */
async function detach(): Promise<void> {
  fs.mkdirSync(config.dataDir, { recursive: true });
  await stopPrevious();
  fs.rmSync(readyFile, { force: true });
  const log = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!], { cwd: ROOT, detached: true, stdio: ['ignore', log, log], env: { ...process.env, NO_COLOR: '1' } });
  child.unref();
  // No deadline of its own: the launcher gives up by itself (a service that exits or never listens
  // fails its start, which stops every process it started) and then exits; leaving earlier would
  // leave it running in the background with nobody told.
  for (;;) {
    if (fs.existsSync(readyFile)) {
      const { url: u, key } = JSON.parse(fs.readFileSync(readyFile, 'utf8')) as { url: string; key: string };
      banner(u, key);
      out(`Running in the background (logs: ${path.relative(process.cwd(), logFile)}); stop it with: make down`);
      return;
    }
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  // The launcher said why it gave up (after stopping everything it started) as its last `make up:` line.
  const why = fs.readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('make up: ')).pop();
  process.stderr.write(`${why ?? 'make up: the background start failed'}; everything it started is stopped (log: ${logFile})\n`);
  process.exit(1);
}

const cmd = process.argv[2];
if (cmd === '--detach') await detach();
else if (cmd === 'down') out((await stopPrevious()) ? 'Stopped.' : 'Nothing was running.');
else await up();
