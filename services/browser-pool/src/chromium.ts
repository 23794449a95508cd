/**
 * One Chromium process: launched by a supervisor of its own (supervisor.ts; the leader of its own
 * process group, outliving the pool process) with its own directory `<root>/<browserId>` holding
 * the user-data dir and the downloads folder. It has no DevTools port: the pool talks CDP to it
 * over `--remote-debugging-pipe` only (held by the supervisor, reached over its Unix socket), and
 * CDP clients reach it through the pool's proxy, which multiplexes them over that pipe. Confined as
 * `confinement.ts` decides (own uid, namespaces, sandbox, policy); its environment is built from
 * nothing. `stop()` kills the whole group and removes the directory.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import { processStartTime } from '../../common/src/process-start.js';
import { CdpConnection } from './cdp-connection.js';
import type { CpuGroup } from './cpu-group.js';
import { adoptUid, egressSocketPath, handUid, NAMESPACE_SCRIPT, namespaceArgs, releaseUid, takeUid, type BrowserConfinement } from './confinement.js';
import { killGroup, processesUsing, waitGroupGone } from './process-groups.js';
import { connectSupervisor, removeState, spawnSupervisor, stopSupervisor, supervisorGone, writeState, type Spawned, type SupervisorState } from './supervisor.js';

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
  /** How long the browser's supervisor keeps it running with no pool process connected (POOL_RESTART_GRACE_MS). */
  restartGraceMs?: number | undefined;
  /** How much nicer than the pool Chromium and its supervisor run (POOL_BROWSER_NICE; 0 = the same priority). */
  nice?: number | undefined;
  /** The cgroup every browser of the pool runs in (POOL_BROWSER_CPU_SHARES), where the host has one. */
  cpuGroup?: CpuGroup | undefined;
}

/** Longest path of Chromium's singleton socket below its TMPDIR. */
const SOCKET_SUFFIX = '/org.chromium.Chromium.XXXXXX/SingletonSocket';

/**
 * Where the browsers under `rootDir` keep their TMPDIRs. Chromium puts its singleton socket under
 * TMPDIR and a Unix socket path must stay under 108 bytes, so the TMPDIRs live beside the
 * browsers (`<rootDir>.tmp/<id>`, removed with the data) when that path is short enough, else
 * in the system temp dir under a prefix unique to `rootDir`.
 */
export function tempLocation(rootDir: string): { dir: string; prefix: string } {
  const abs = path.resolve(rootDir);
  // Its own folder beside the root: two pools with roots in one folder never take each other's for strays.
  const local = path.join(path.dirname(abs), `${path.basename(abs)}.tmp`);
  if (Buffer.byteLength(local) + 1 + 16 + SOCKET_SUFFIX.length < 104) return { dir: local, prefix: '' };
  return { dir: os.tmpdir(), prefix: `atsbp-${createHash('sha256').update(abs).digest('hex').slice(0, 10)}-` };
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
    // No spare renderer: an idle browser would hold a second, empty renderer (≈ 40 MB) for a faster first navigation.
    // No omnibox popup: headless Chromium 15x loads its WebUI (chrome://omnibox-popup.top-chrome) in a renderer of its own at every
    // launch; without it, a launch and its first 2 s cost 2.1 instead of 4.1 CPU-s and an idle browser 315 instead of 371 MB PSS.
    '--disable-features=Translate,MediaRouter,OptimizationHints,InterestFeedContentSuggestions,SpareRendererForSitePerProcess,WebUIOmniboxPopup,WebUIOmniboxAimPopup',
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

/** One launched Chromium process group with its directories and its DevTools pipe (held by its supervisor). */
export class Chromium {
  readonly id: string;
  readonly dir: string;
  readonly tmpDir: string;
  readonly userDataDir: string;
  readonly downloadsDir: string;
  /** Chromium's leader process (the id of its process group). */
  readonly pid: number;
  /** The uid its processes run as (undefined = this process's). */
  readonly uid: number | undefined;
  readonly conn: CdpConnection;
  /** Its supervisor (supervisor.ts) and where the pool reaches it. */
  readonly supervisor: SupervisorState;
  /** Resolves when Chromium and its supervisor have exited (for whatever reason). */
  readonly exited: Promise<void>;
  readonly #rootDir: string;
  readonly #logger: Logger;
  #gone = false;
  #stopping: Promise<void> | undefined;
  #removed: Promise<void> = Promise.resolve();

  private constructor(o: { rootDir: string; state: SupervisorState; conn: CdpConnection; exited: Promise<void>; logger: Logger }) {
    this.id = o.state.id;
    this.#rootDir = o.rootDir;
    this.dir = path.join(o.rootDir, o.state.id);
    this.tmpDir = tempDirFor(o.rootDir, o.state.id);
    this.userDataDir = path.join(this.dir, 'profile');
    this.downloadsDir = path.join(this.dir, 'downloads');
    this.pid = o.state.pgid;
    this.uid = o.state.uid;
    this.supervisor = o.state;
    this.conn = o.conn;
    this.exited = o.exited.then(() => void (this.#gone = true));
    this.#logger = o.logger;
  }

  /** The process group id (the leader's pid: its supervisor starts it in a group of its own). */
  get pgid(): number {
    return this.pid;
  }

  get alive(): boolean {
    return !this.#gone;
  }

  /** Launches Chromium under a supervisor and resolves once it answers over its DevTools pipe. */
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
    const removeAll = () => {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(tmpDir, { recursive: true, force: true });
      removeState(o.rootDir, o.id);
    };
    let spawned: Spawned | undefined;
    let conn: CdpConnection | undefined;
    // Long: a launch needs about 2 CPU-s, and on a saturated node (two cores, CPU pressure at 95 %) it took over 20 s,
    // which failed creates that would have been served. A create's own caller still bounds it (its signal; the gateway's 55 s).
    const timeoutMs = o.timeoutMs ?? 45_000;
    let onAbort: (() => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      fs.mkdirSync(userDataDir, { recursive: true, mode: 0o700 });
      fs.mkdirSync(downloadsDir, { recursive: true, mode: 0o700 });
      if (uid !== undefined) for (const d of [dir, userDataDir, downloadsDir]) fs.chownSync(d, uid, uid);
      if (!o.confinement.namespaces) fs.mkdirSync(tmpDir, { recursive: true, mode: 0o700 });
      const { file, args } = launchCommand(o, dir, uid);
      const s = await spawnSupervisor({ rootDir: o.rootDir, id: o.id, file, args, env: chromiumEnv(dir, o.confinement.namespaces ? '/tmp' : tmpDir), graceMs: o.restartGraceMs ?? 60_000, nice: o.nice, beforeStart: o.cpuGroup && ((pid) => o.cpuGroup!.add(pid)) });
      spawned = s;
      const state: SupervisorState = { id: o.id, pid: s.child.pid!, start: processStartTime(s.child.pid!) ?? 0, pgid: s.pgid, socket: s.socket, uid };
      if (uid !== undefined) handUid(uid, state);
      writeState(o.rootDir, state);
      const socket = await connectSupervisor(s.socket);
      const c = new CdpConnection(socket, socket);
      conn = c;
      await new Promise<void>((resolve, reject) => {
        if (o.signal?.aborted) return reject(new Error('launch aborted'));
        onAbort = () => reject(new Error('launch aborted'));
        o.signal?.addEventListener('abort', onAbort, { once: true });
        timer = setTimeout(() => reject(new Error(`Chromium did not start within ${timeoutMs} ms`)), timeoutMs);
        s.child.once('exit', (code, signal) => reject(new Error(`Chromium exited during start (code ${code}, signal ${signal}): ${s.stderr().slice(-500)}`)));
        c.send('Browser.getVersion', {}, undefined, timeoutMs).then(() => resolve(), () => undefined);
      });
      const exited = new Promise<void>((resolve) => {
        if (s.child.exitCode !== null || s.child.signalCode !== null) resolve();
        else s.child.once('exit', () => resolve());
      });
      return new Chromium({ rootDir: o.rootDir, state, conn: c, exited, logger: o.logger });
    } catch (err) {
      conn?.close();
      if (spawned) {
        killGroup(spawned.pgid, 'SIGKILL');
        spawned.child.kill('SIGKILL');
        if (spawned.child.exitCode === null && spawned.child.signalCode === null) await new Promise((r) => spawned!.child.once('exit', r));
        if (!(await waitGroupGone(spawned.pgid, 2000))) o.logger.error({ browserId: o.id, pgid: spawned.pgid }, 'chromium process group survived SIGKILL');
        else if (uid !== undefined) releaseUid(uid);
      } else if (uid !== undefined) releaseUid(uid);
      removeAll();
      throw err instanceof Error && /spawn perl ENOENT/.test(err.message) ? new Error('cannot start the browser supervisor: perl is missing (apt-get install perl-base)') : err;
    } finally {
      clearTimeout(timer);
      if (onAbort) o.signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Connects again to a browser a previous pool process launched (its supervisor kept it
   * running); resolves once Chromium answers. Its uid is claimed for this process again.
   */
  static async adopt(o: { rootDir: string; state: SupervisorState; logger: Logger; timeoutMs?: number }): Promise<Chromium> {
    const socket = await connectSupervisor(o.state.socket);
    const conn = new CdpConnection(socket, socket, undefined, { adopted: true });
    try {
      await conn.send('Browser.getVersion', {}, undefined, o.timeoutMs ?? 5000);
    } catch (err) {
      conn.close();
      throw err;
    }
    if (o.state.uid !== undefined) adoptUid(o.state.uid);
    const exited = conn.closed.then(() => supervisorGone(o.state));
    return new Chromium({ rootDir: o.rootDir, state: o.state, conn, exited, logger: o.logger });
  }

  /** Records what a new pool process needs to take this browser over (beside the supervisor's own state). */
  saveState(browser: Record<string, unknown>): void {
    if (this.#stopping) return;
    Object.assign(this.supervisor, { browser });
    writeState(this.#rootDir, this.supervisor);
  }

  /**
   * Lets the browser run on without this process: the connection to its supervisor is closed and
   * a next pool process of the same data dir takes it over (see BrowserPool's recovery).
   */
  detach(): void {
    this.#stopping ??= Promise.resolve();
    this.conn.close();
  }

  /**
   * Kills the process group and resolves once every member is gone. Its directories are removed
   * right after, in the background (a stop answers sooner); `removed` resolves when that is done.
   * Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      removeState(this.#rootDir, this.id);
      this.conn.close();
      stopSupervisor(this.supervisor);
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
 * Kills every Chromium process group a crashed predecessor left under `rootDir` (but those in
 * `keep`, the browsers taken over): found by the `--user-data-dir` every one of their processes
 * carries, so another pool's browsers are never touched. Resolves to the groups killed once none of them has a live member.
 */
export async function killStrays(rootDir: string, logger: Logger, keep: ReadonlySet<number> = new Set()): Promise<number[]> {
  const groups = [...new Set(processesUsing(`--user-data-dir=${rootDir}${path.sep}`).map((p) => p.pgid))].filter((g) => !keep.has(g));
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
