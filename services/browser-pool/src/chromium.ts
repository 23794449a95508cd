/**
 * One Chromium process: launched detached (the leader of its own process group) with its own
 * directory `<root>/<browserId>` holding the user-data dir and the downloads folder; the pool
 * talks to it over the DevTools pipe, clients reach it on its DevTools port through the CDP
 * proxy. `stop()` kills the whole group and removes the directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../../common/src/logger.js';
import { CdpConnection } from './cdp-connection.js';
import { killGroup, processesUsing, waitGroupGone } from './process-groups.js';

/** How to launch one browser. */
export interface LaunchOptions {
  executable: string;
  /** Parent of every browser directory (DATA_DIR/browser-pool/browsers). */
  rootDir: string;
  /** The browser id; names the directory. */
  id: string;
  width: number;
  height: number;
  noSandbox: boolean;
  /** `--proxy-server` value, e.g. http://127.0.0.1:3128. */
  proxyServer?: string | undefined;
  extraArgs?: string[];
  logger: Logger;
  timeoutMs?: number;
  /** Aborting kills a launch in progress (the pool is shutting down). */
  signal?: AbortSignal | undefined;
}

/** Longest path of Chromium's singleton socket below its TMPDIR. */
const SOCKET_SUFFIX = '/org.chromium.Chromium.XXXXXX/SingletonSocket';

/**
 * Where the browsers under `rootDir` keep their TMPDIRs. Chromium puts its singleton socket under
 * TMPDIR and a Unix socket path must stay under 108 bytes, so the TMPDIRs live beside the
 * browsers (`<rootDir>/../tmp/<id>`, removed with the data) when that path is short enough, else
 * in the system temp dir under a prefix unique to `rootDir`.
 */
export function tempLocation(rootDir: string): { dir: string; prefix: string } {
  const local = path.join(path.dirname(path.resolve(rootDir)), 'tmp');
  if (Buffer.byteLength(local) + 1 + 16 + SOCKET_SUFFIX.length < 104) return { dir: local, prefix: '' };
  return { dir: os.tmpdir(), prefix: `atsbp-${createHash('sha256').update(path.resolve(rootDir)).digest('hex').slice(0, 10)}-` };
}

function tempDirFor(rootDir: string, id: string): string {
  const t = tempLocation(rootDir);
  return path.join(t.dir, `${t.prefix}${id.slice(-16)}`);
}

const DEVTOOLS_LINE = /DevTools listening on (ws:\/\/[^\s]+)/;

/** Flags every browser gets: quiet (no background traffic), unthrottled background tabs, no first-run UI. */
export function chromiumArgs(o: LaunchOptions, userDataDir: string): string[] {
  const args = [
    '--headless=new',
    '--remote-debugging-pipe',
    '--remote-debugging-port=0',
    '--remote-allow-origins=*',
    `--user-data-dir=${userDataDir}`,
    `--window-size=${o.width},${o.height}`,
    '--no-first-run',
    // No "unsupported command-line flag" infobar: it would take height from the viewport.
    '--test-type',
    '--no-default-browser-check',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-breakpad',
    '--disable-crash-reporter',
    '--disable-client-side-phishing-detection',
    '--disable-default-apps',
    '--disable-extensions',
    '--disable-hang-monitor',
    '--disable-popup-blocking',
    '--disable-prompt-on-repost',
    '--disable-background-timer-throttling',
    '--disable-backgrounding-occluded-windows',
    '--disable-renderer-backgrounding',
    '--disable-search-engine-choice-screen',
    '--disable-features=Translate,MediaRouter,OptimizationHints,InterestFeedContentSuggestions',
    '--metrics-recording-only',
    '--password-store=basic',
    '--use-mock-keychain',
    '--force-color-profile=srgb',
    '--mute-audio',
  ];
  if (o.noSandbox) args.push('--no-sandbox');
  if (smallDevShm()) args.push('--disable-dev-shm-usage');
  if (o.proxyServer) args.push(`--proxy-server=${o.proxyServer}`);
  args.push(...(o.extraArgs ?? []), 'about:blank');
  return args;
}

let devShmSmall: boolean | undefined;
/** Containers often give /dev/shm 64 MB, too little for Chromium's shared memory. */
function smallDevShm(): boolean {
  if (devShmSmall === undefined) {
    try {
      const s = fs.statfsSync('/dev/shm');
      devShmSmall = s.blocks * s.bsize < 512 * 1024 * 1024;
    } catch {
      devShmSmall = true;
    }
  }
  return devShmSmall;
}

/** One launched Chromium process group with its directories and its DevTools pipe. */
export class Chromium {
  readonly id: string;
  readonly dir: string;
  readonly tmpDir: string;
  readonly userDataDir: string;
  readonly downloadsDir: string;
  readonly pid: number;
  /** Direct DevTools WebSocket URL of the browser target (internal only). */
  readonly wsUrl: string;
  readonly port: number;
  readonly conn: CdpConnection;
  /** Resolves when the leader process has exited (for whatever reason). */
  readonly exited: Promise<void>;
  readonly #child: ChildProcess;
  readonly #logger: Logger;
  #stopping: Promise<void> | undefined;
  #removed: Promise<void> = Promise.resolve();

  private constructor(o: { id: string; dir: string; tmpDir: string; child: ChildProcess; wsUrl: string; conn: CdpConnection; exited: Promise<void>; logger: Logger }) {
    this.id = o.id;
    this.dir = o.dir;
    this.tmpDir = o.tmpDir;
    this.userDataDir = path.join(o.dir, 'profile');
    this.downloadsDir = path.join(o.dir, 'downloads');
    this.#child = o.child;
    this.pid = o.child.pid!;
    this.wsUrl = o.wsUrl;
    this.port = Number(new URL(o.wsUrl).port);
    this.conn = o.conn;
    this.exited = o.exited;
    this.#logger = o.logger;
  }

  /** The process group id (the leader's pid: it is spawned detached). */
  get pgid(): number {
    return this.pid;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Launches Chromium and resolves once its DevTools endpoint and pipe are up. */
  static async launch(o: LaunchOptions): Promise<Chromium> {
    const dir = path.join(o.rootDir, o.id);
    const userDataDir = path.join(dir, 'profile');
    const downloadsDir = path.join(dir, 'downloads');
    fs.mkdirSync(userDataDir, { recursive: true, mode: 0o700 });
    fs.mkdirSync(downloadsDir, { recursive: true, mode: 0o700 });
    const tmpDir = tempDirFor(o.rootDir, o.id);
    fs.mkdirSync(tmpDir, { recursive: true, mode: 0o700 });
    const child = spawn(o.executable, chromiumArgs(o, userDataDir), {
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
      // Chromium's singleton socket dir and other temporaries go to the browser's own TMPDIR, so
      // removing it leaves nothing behind even after SIGKILL.
      env: { ...process.env, TMPDIR: tmpDir, DBUS_SESSION_BUS_ADDRESS: 'disabled:' },
    });
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    const cleanup = async () => {
      if (child.pid) {
        killGroup(child.pid);
        await exited;
        await waitGroupGone(child.pid, 2000);
      }
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(tmpDir, { recursive: true, force: true });
    };
    try {
      let onAbort: (() => void) | undefined;
      let timer: NodeJS.Timeout | undefined;
      const wsUrl = await new Promise<string>((resolve, reject) => {
        if (o.signal?.aborted) return reject(new Error('launch aborted'));
        onAbort = () => reject(new Error('launch aborted'));
        o.signal?.addEventListener('abort', onAbort, { once: true });
        let text = '';
        timer = setTimeout(() => reject(new Error(`Chromium did not start within ${o.timeoutMs ?? 20000} ms`)), o.timeoutMs ?? 20000);
        child.once('error', (err) => reject(new Error(`cannot start Chromium at ${o.executable}: ${err.message}`)));
        child.once('exit', (code, signal) => reject(new Error(`Chromium exited during start (code ${code}, signal ${signal}): ${text.slice(-500)}`)));
        child.stderr!.setEncoding('utf8');
        child.stderr!.on('data', (chunk: string) => {
          if (text.length < 64 * 1024) text += chunk;
          const m = DEVTOOLS_LINE.exec(text);
          if (m) {
            text = '';
            resolve(m[1]!);
          }
        });
      }).finally(() => {
        clearTimeout(timer);
        if (onAbort) o.signal?.removeEventListener('abort', onAbort);
      });
      // Keep draining stderr so Chromium never blocks on a full pipe.
      child.stderr!.removeAllListeners('data');
      child.stderr!.resume();
      const conn = new CdpConnection(child.stdio[4] as Readable, child.stdio[3] as Writable);
      return new Chromium({ id: o.id, dir, tmpDir, child, wsUrl, conn, exited, logger: o.logger });
    } catch (err) {
      await cleanup();
      throw err;
    }
  }

  /**
   * Kills the process group and resolves once every member is gone. Its directories are removed
   * right after, in the background (a stop answers sooner); `removed` resolves when that is done.
   * Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.conn.close();
      killGroup(this.pgid, 'SIGKILL');
      await this.exited;
      if (!(await waitGroupGone(this.pgid, 5000))) this.#logger.error({ browserId: this.id, pgid: this.pgid }, 'chromium process group survived SIGKILL');
      this.#removed = Promise.all([
        fs.promises.rm(this.dir, { recursive: true, force: true, maxRetries: 3 }),
        fs.promises.rm(this.tmpDir, { recursive: true, force: true, maxRetries: 3 }),
      ]).then(
        () => {},
        (err) => this.#logger.error({ err, browserId: this.id }, 'browser directory not removed'),
      );
    })();
    return this.#stopping;
  }

  /** Resolves once a stopped browser's directories are gone. */
  get removed(): Promise<void> {
    return (this.#stopping ?? Promise.resolve()).then(() => this.#removed);
  }
}

/**
 * Kills every Chromium process group a crashed predecessor left under `rootDir`: found by the
 * `--user-data-dir` every one of their processes carries, so another pool's browsers are never
 * touched. Resolves to the groups killed once none of them has a live member.
 */
export async function killStrays(rootDir: string, logger: Logger): Promise<number[]> {
  const groups = [...new Set(processesUsing(`--user-data-dir=${rootDir}${path.sep}`).map((p) => p.pgid))];
  for (const pgid of groups) killGroup(pgid, 'SIGKILL');
  for (const pgid of groups) if (!(await waitGroupGone(pgid, 5000))) logger.error({ pgid }, 'stray chromium group survived SIGKILL');
  return groups;
}

/** Temporary directories of browsers under `rootDir` (all of them are strays when the pool starts). */
export function strayTempDirs(rootDir: string): string[] {
  const t = tempLocation(rootDir);
  try {
    return fs
      .readdirSync(t.dir)
      .filter((n) => n.startsWith(t.prefix) && (t.prefix || /^[a-z0-9_]{1,16}$/.test(n)))
      .map((n) => path.join(t.dir, n));
  } catch {
    return [];
  }
}
