/**
 * The per-browser supervisor (supervisor.pl, the containerd-shim pattern): a small process in a
 * session of its own that starts Chromium and holds its DevTools pipe, exposed on a Unix socket
 * in a directory only this process's uid may open. The pool connects to it instead of owning the
 * pipe, so a pool process that dies (kill -9) or restarts leaves its browsers running, and the
 * next process of the same data dir connects again. A state file beside each socket says which
 * supervisor holds which browser (pid and start time, so a reused pid is never taken for it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { besideSource } from '../../common/src/source-file.js';

/** The script the supervisor runs (perl; `make build` compiles no copy of it into dist/). */
export const SUPERVISOR_SCRIPT = besideSource(import.meta.url, 'supervisor.pl');

/** What the pool records of a supervised browser, beside its socket. */
export interface SupervisorState {
  /** The browser id. */
  id: string;
  /** The supervisor process. */
  pid: number;
  start: number;
  /** Chromium's process group (its leader's pid). */
  pgid: number;
  socket: string;
  /** The uid the browser runs as (undefined = the pool's). */
  uid?: number | undefined;
  /** What the browser needs again from a new pool process (see LiveBrowser). */
  browser?: Record<string, unknown>;
}

/**
 * Where the supervisors of the browsers under `rootDir` keep their sockets and state files:
 * `<rootDir>/../supervisors`, mode 0700, unless that path is too long for a Unix socket; then a
 * directory in the system temp dir named after `rootDir`.
 */
export function supervisorDir(rootDir: string): string {
  const local = path.join(path.dirname(path.resolve(rootDir)), 'supervisors');
  if (Buffer.byteLength(local) + 1 + 16 + '.sock'.length < 104) return local;
  return path.join(os.tmpdir(), `atsbp-sup-${createHash('sha256').update(path.resolve(rootDir)).digest('hex').slice(0, 10)}`);
}

function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? st.uid)) throw new Error(`${dir} is not a directory of this process's uid`);
  fs.chmodSync(dir, 0o700);
}

const stateFile = (dir: string, id: string) => path.join(dir, `${id}.json`);

/** The state and start of process `pid` as /proc shows it; undefined when it is gone. */
function procStat(pid: number): { state: string; start: number } | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0]!, start: Number(rest[19]) };
  } catch {
    return undefined;
  }
}

/** True while the supervisor the state names runs (not a zombie, not another process under its pid). */
export function supervisorAlive(s: Pick<SupervisorState, 'pid' | 'start'>): boolean {
  const st = procStat(s.pid);
  return st !== undefined && st.start === s.start && st.state !== 'Z';
}

/** Resolves once the supervisor is gone (polled: it is not necessarily our child). */
export async function supervisorGone(s: Pick<SupervisorState, 'pid' | 'start'>): Promise<void> {
  for (let delay = 5; supervisorAlive(s); delay = Math.min(delay * 2, 100)) await new Promise((r) => setTimeout(r, delay));
}

/** Spawned and ready: the child, Chromium's pgid and where to connect. */
export interface Spawned {
  child: ChildProcess;
  pgid: number;
  socket: string;
  /** Chromium's stderr (its last 4 KB), written by the supervisor when Chromium exits. */
  stderr(): string;
}

/**
 * Starts a supervisor that runs `file args` with `env`, for browser `id` under `rootDir`.
 * Resolves once it listens and Chromium is started; `graceMs`: how long it keeps Chromium with no
 * pool connected before it ends it (whole seconds; 0: it ends with the pool's connection).
 */
export async function spawnSupervisor(o: { rootDir: string; id: string; file: string; args: string[]; env: NodeJS.ProcessEnv; graceMs: number; nice?: number | undefined; signal?: AbortSignal | undefined; beforeStart?: ((pid: number) => void) | undefined }): Promise<Spawned> {
  const dir = supervisorDir(o.rootDir);
  ensureDir(dir);
  const socket = path.join(dir, `${o.id.slice(-16)}.sock`);
  const perl = ['perl', SUPERVISOR_SCRIPT, socket, String(Math.ceil(o.graceMs / 1000))];
  // `nice` execs perl (the same process), and Chromium inherits the priority from it.
  const [bin, ...args] = o.nice ? ['nice', '-n', String(o.nice), ...perl] : perl;
  const child = spawn(bin!, args, {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: o.env,
  });
  child.stdin!.on('error', () => {}); // it exited early: the exit says why
  // The supervisor waits for its command on stdin: what is done to it now (its cgroup) holds for Chromium too.
  if (child.pid !== undefined) o.beforeStart?.(child.pid);
  child.stdin!.end([o.file, ...o.args].map((a) => `${a}\0`).join(''));
  let err = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => (err = (err + chunk).slice(-8192)));
  const pgid = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      out += chunk;
      const m = /^ready (\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('error', (e) => reject(new Error(`cannot start the browser supervisor (perl): ${e.message}`)));
    child.once('exit', (code, sig) => reject(new Error(`browser supervisor exited during start (code ${code}, signal ${sig}): ${err.slice(-500)}`)));
  });
  return { child, pgid, socket, stderr: () => err };
}

/** Connects to a supervisor's socket; rejects when nothing listens there or another pool holds it. */
export function connectSupervisor(socketPath: string, timeoutMs = 5000): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    const timer = setTimeout(() => s.destroy(new Error(`supervisor at ${socketPath} did not answer within ${timeoutMs} ms`)), timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

export function writeState(rootDir: string, s: SupervisorState): void {
  const dir = supervisorDir(rootDir);
  const file = stateFile(dir, s.id);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(s), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

export function removeState(rootDir: string, id: string): void {
  fs.rmSync(stateFile(supervisorDir(rootDir), id), { force: true });
}

/** Every state file of the browsers under `rootDir` (a restarted pool's candidates to reattach). */
export function readStates(rootDir: string): SupervisorState[] {
  const dir = supervisorDir(rootDir);
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const out: SupervisorState[] = [];
  for (const n of names) {
    try {
      out.push(JSON.parse(fs.readFileSync(path.join(dir, n), 'utf8')) as SupervisorState);
    } catch {
      fs.rmSync(path.join(dir, n), { force: true }); // half written by a process that died
    }
  }
  return out;
}

/** Ends a supervisor and its Chromium (SIGTERM: it kills Chromium's group, then exits). */
export function stopSupervisor(s: Pick<SupervisorState, 'pid' | 'start' | 'pgid'>): void {
  // Without its supervisor the group is gone already (killed at its exit, or ended with the pipe): its id may be another's now.
  if (!supervisorAlive(s)) return;
  for (const [target, signal] of [[-s.pgid, 'SIGKILL'], [s.pid, 'SIGTERM']] as const) {
    try {
      process.kill(target, signal);
    } catch {
      /* gone */
    }
  }
}

/** Removes the sockets of supervisors that died without removing them (killed), but those of `keep` (browser ids). */
export function removeStaleSockets(rootDir: string, keep: ReadonlySet<string>): void {
  const dir = supervisorDir(rootDir);
  const live = new Set([...keep].map((id) => `${id.slice(-16)}.sock`));
  try {
    for (const n of fs.readdirSync(dir)) if (n.endsWith('.sock') && !live.has(n)) fs.rmSync(path.join(dir, n), { force: true });
  } catch {
    /* no directory yet */
  }
}
