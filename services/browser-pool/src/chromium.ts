/**
 * One Chromium process: launched detached (the leader of its own process group) with its own
 * directory `<root>/<browserId>` holding the user-data dir and the downloads folder. It has no
 * DevTools port: the pool talks CDP to it over `--remote-debugging-pipe` only, and CDP clients
 * reach it through the pool's proxy, which multiplexes them over that pipe. Confined as
 * `confinement.ts` decides (own uid, namespaces, sandbox, policy); its environment is built from
 * nothing. `stop()` kills the whole group and removes the directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../../common/src/logger.js';
import { CdpConnection } from './cdp-connection.js';
import { egressSocketPath, NAMESPACE_SCRIPT, namespaceArgs, releaseUid, takeUid, type BrowserConfinement } from './confinement.js';
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
  /** How it is confined (see confinement.ts). */
  confinement: BrowserConfinement;
  /** `--proxy-server` value: the browser's egress proxy, http://127.0.0.1:<port>; every request (loopback too) goes through it. */
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

/** Flags every browser gets: quiet (no background traffic), unthrottled background tabs, no first-run UI. */
export function chromiumArgs(o: LaunchOptions, userDataDir: string): string[] {
  const args = [
    '--headless=new',
    '--remote-debugging-pipe',
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
  if (!o.confinement.sandbox) args.push('--no-sandbox');
  if (!o.confinement.namespaces && smallDevShm()) args.push('--disable-dev-shm-usage');
  if (o.proxyServer) {
    // Loopback through the proxy too; no QUIC or WebRTC UDP that would pass it by.
    args.push(`--proxy-server=${o.proxyServer}`, '--proxy-bypass-list=<-loopback>', '--disable-quic', '--force-webrtc-ip-handling-policy=disable_non_proxied_udp');
  }
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


/** The environment of a browser: nothing of the service's own (no secret can leak into it). */
function chromiumEnv(home: string, tmpDir: string): NodeJS.ProcessEnv {
  return {
    PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin',
    HOME: home,
    TMPDIR: tmpDir,
    LANG: 'C.UTF-8',
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    DBUS_SESSION_BUS_ADDRESS: 'disabled:',
  };
}

/** The program and arguments that start Chromium as `confinement` says. */
function launchCommand(o: LaunchOptions, dir: string, uid: number | undefined): { file: string; args: string[] } {
  const args = chromiumArgs(o, path.join(dir, 'profile'));
  if (!o.confinement.namespaces) return { file: o.executable, args };
  return {
    file: 'unshare',
    args: [
      ...namespaceArgs(o.confinement),
      '--',
      '/bin/sh',
      '-c',
      NAMESPACE_SCRIPT,
      'ats-browser',
      dir,
      uid === undefined ? '' : String(uid),
      o.confinement.policyDir ?? '',
      o.confinement.netNamespace ? egressSocketPath(o.rootDir, o.id) : '',
      o.executable,
      ...args,
    ],
  };
}

/** One launched Chromium process group with its directories and its DevTools pipe. */
export class Chromium {
  readonly id: string;
  readonly dir: string;
  readonly tmpDir: string;
  readonly userDataDir: string;
  readonly downloadsDir: string;
  readonly pid: number;
  /** The uid its processes run as (undefined = this process's). */
  readonly uid: number | undefined;
  readonly conn: CdpConnection;
  /** Resolves when the leader process has exited (for whatever reason). */
  readonly exited: Promise<void>;
  readonly #child: ChildProcess;
  readonly #logger: Logger;
  #stopping: Promise<void> | undefined;
  #removed: Promise<void> = Promise.resolve();

  private constructor(o: { id: string; dir: string; tmpDir: string; child: ChildProcess; uid: number | undefined; conn: CdpConnection; exited: Promise<void>; logger: Logger }) {
    this.id = o.id;
    this.dir = o.dir;
    this.tmpDir = o.tmpDir;
    this.userDataDir = path.join(o.dir, 'profile');
    this.downloadsDir = path.join(o.dir, 'downloads');
    this.#child = o.child;
    this.pid = o.child.pid!;
    this.uid = o.uid;
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

  /** Launches Chromium and resolves once it answers over its DevTools pipe. */
  static async launch(o: LaunchOptions): Promise<Chromium> {
    const dir = path.join(o.rootDir, o.id);
    const userDataDir = path.join(dir, 'profile');
    const downloadsDir = path.join(dir, 'downloads');
    fs.mkdirSync(o.rootDir, { recursive: true, mode: 0o711 });
    try {
      fs.accessSync(o.executable, fs.constants.X_OK);
    } catch (err) {
      throw new Error(`cannot start Chromium at ${o.executable}: ${(err as NodeJS.ErrnoException).code}`);
    }
    const uid = o.confinement.uidBase === undefined ? undefined : takeUid(o.confinement.uidBase);
    // In its namespace a browser's temporaries go to its private /tmp, gone with it; otherwise to
    // a TMPDIR of its own, so removing that leaves nothing behind even after SIGKILL.
    const tmpDir = tempDirFor(o.rootDir, o.id);
    let child: ChildProcess;
    try {
      fs.mkdirSync(userDataDir, { recursive: true, mode: 0o700 });
      fs.mkdirSync(downloadsDir, { recursive: true, mode: 0o700 });
      if (uid !== undefined) for (const d of [dir, userDataDir, downloadsDir]) fs.chownSync(d, uid, uid);
      if (!o.confinement.namespaces) fs.mkdirSync(tmpDir, { recursive: true, mode: 0o700 });
      const { file, args } = launchCommand(o, dir, uid);
      child = spawn(file, args, {
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
        env: chromiumEnv(dir, o.confinement.namespaces ? '/tmp' : tmpDir),
      });
    } catch (err) {
      // Nothing started: give back the uid and the folders.
      if (uid !== undefined) releaseUid(uid);
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(tmpDir, { recursive: true, force: true });
      throw err;
    }
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    const cleanup = async () => {
      let gone = true;
      if (child.pid) {
        killGroup(child.pid);
        await exited;
        gone = await waitGroupGone(child.pid, 2000);
      }
      if (uid !== undefined && gone) releaseUid(uid);
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(tmpDir, { recursive: true, force: true });
    };
    const conn = new CdpConnection(child.stdio[4] as Readable, child.stdio[3] as Writable);
    let text = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      if (text.length < 64 * 1024) text += chunk;
    });
    try {
      let onAbort: (() => void) | undefined;
      let timer: NodeJS.Timeout | undefined;
      const timeoutMs = o.timeoutMs ?? 20000;
      await new Promise<void>((resolve, reject) => {
        if (o.signal?.aborted) return reject(new Error('launch aborted'));
        onAbort = () => reject(new Error('launch aborted'));
        o.signal?.addEventListener('abort', onAbort, { once: true });
        timer = setTimeout(() => reject(new Error(`Chromium did not start within ${timeoutMs} ms`)), timeoutMs);
        child.once('error', (err) => reject(new Error(`cannot start Chromium at ${o.executable}: ${err.message}`)));
        child.once('exit', (code, signal) => reject(new Error(`Chromium exited during start (code ${code}, signal ${signal}): ${text.slice(-500)}`)));
        conn.send('Browser.getVersion', {}, undefined, timeoutMs).then(() => resolve(), () => undefined);
      }).finally(() => {
        clearTimeout(timer);
        if (onAbort) o.signal?.removeEventListener('abort', onAbort);
      });
      // Keep draining stderr so Chromium never blocks on a full pipe.
      child.stderr!.removeAllListeners('data');
      child.stderr!.resume();
      return new Chromium({ id: o.id, dir, tmpDir, child, uid, conn, exited, logger: o.logger });
    } catch (err) {
      conn.close();
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
      else if (this.uid !== undefined) releaseUid(this.uid);
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
