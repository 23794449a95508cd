/**
 * The browsercode agent's terminal: one `bash -c` command with the run's disk as working
 * directory, its output streamed as it comes, time and output capped, the whole process group
 * killed on timeout or stop. The environment is built from nothing (no service secret can leak
 * into it) and, when the service runs as root, the command runs as an unprivileged user.
 * In the sandbox (the default) the command also runs in namespaces of its own (`unshare`):
 *  - PID and mount, with a fresh /proc: it sees no other process (not the service's environment
 *    or another run's working directory through /proc), and when it ends everything it started
 *    ends with it, even what tried to escape with setsid;
 *  - network (unless the host network is allowed): it cannot reach the services' unauthenticated
 *    internal ports, Chromium's DevTools ports or anything else.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';

export interface ShellLimits {
  /** Wall-clock limit of one command. */
  timeoutMs: number;
  /** Output kept (and streamed) per command; the rest is counted and dropped. */
  maxOutputBytes: number;
}

export interface ShellResult {
  exitCode: number | null;
  /** The signal that ended the command (SIGKILL after a timeout or stop). */
  signal: string | null;
  timedOut: boolean;
  /** Output beyond maxOutputBytes was dropped. */
  truncated: boolean;
  /** stdout and stderr interleaved as they came, up to the cap. */
  output: string;
  durationMs: number;
}

export interface ShellOptions extends ShellLimits {
  cwd: string;
  signal: AbortSignal;
  onOutput(stream: 'stdout' | 'stderr', chunk: string): void;
  /** uid/gid to run as; undefined = as this process. */
  user?: { uid: number; gid: number } | undefined;
  /** Namespaces of its own; `network: true` keeps the host's network. Undefined = no sandbox. */
  sandbox?: Sandbox | undefined;
}

export interface Sandbox {
  network: boolean;
}

/** How this service runs commands: limits, the user, the sandbox ('unavailable' = required but impossible here: commands are refused). */
export interface Terminal {
  limits: ShellLimits;
  user: { uid: number; gid: number } | undefined;
  sandbox: Sandbox | 'unavailable' | undefined;
}

/** The account commands run as when this process is root: `nobody`. */
export const UNPRIVILEGED = { uid: 65534, gid: 65534 };

/** Who shell commands run as here: nobody when root, else this process's user. */
export function shellUser(): { uid: number; gid: number } | undefined {
  return process.getuid?.() === 0 ? UNPRIVILEGED : undefined;
}

/** The whole environment of a command: nothing inherited from the service. */
export function shellEnv(cwd: string): NodeJS.ProcessEnv {
  return {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: cwd,
    TMPDIR: cwd,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    PWD: cwd,
  };
}

/** Hands `dir` and everything in it to `user`, so an unprivileged command can work there. */
export async function giveTo(dir: string, user: { uid: number; gid: number } | undefined): Promise<void> {
  if (!user) return;
  await fs.chown(dir, user.uid, user.gid);
  await fs.chmod(dir, 0o700);
  for (const e of await fs.readdir(dir, { withFileTypes: true, recursive: true })) {
    await fs.lchown(path.join(e.parentPath, e.name), user.uid, user.gid).catch(() => undefined);
  }
}

/**
 * The program and arguments that run `command`: bash, behind `unshare` in the sandbox (and
 * `setpriv`, which drops to the user once the namespaces are made, as only root may make them;
 * without root a user namespace makes them possible).
 */
export function shellArgv(command: string, o: Pick<ShellOptions, 'user' | 'sandbox'>): { file: string; args: string[]; user?: { uid: number; gid: number } | undefined } {
  const bash = ['/bin/bash', '-c', command];
  if (!o.sandbox) return { file: bash[0]!, args: bash.slice(1), user: o.user };
  const ns = ['--pid', '--fork', '--kill-child', '--mount', '--mount-proc', ...(o.sandbox.network ? [] : ['--net'])];
  if (process.getuid?.() === 0 && o.user) {
    return { file: 'unshare', args: [...ns, '--', 'setpriv', `--reuid=${o.user.uid}`, `--regid=${o.user.gid}`, '--clear-groups', '--', ...bash] };
  }
  return { file: 'unshare', args: ['--user', ...ns, '--', ...bash], user: o.user };
}

/** Whether the sandbox works here (unshare may be refused, e.g. by a container's seccomp profile); probed once at start. */
export function canSandbox(user: { uid: number; gid: number } | undefined, sandbox: Sandbox): boolean {
  // Inside, the command is PID 1 of its namespace, and without network only `lo` is listed (two header lines and one device).
  const check = `test $$ -eq 1${sandbox.network ? '' : ' && test "$(wc -l < /proc/net/dev)" -le 3'}`;
  const { file, args, user: as } = shellArgv(check, { user, sandbox });
  const r = spawnSync(file, args, { stdio: 'ignore', env: shellEnv('/'), cwd: '/', timeout: 5000, ...(as ? { uid: as.uid, gid: as.gid } : {}) });
  return r.status === 0;
}

export function runShell(command: string, o: ShellOptions): Promise<ShellResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    if (o.signal.aborted) {
      resolve({ exitCode: null, signal: 'SIGKILL', timedOut: false, truncated: false, output: '', durationMs: 0 });
      return;
    }
    const { file, args, user } = shellArgv(command, o);
    const child = spawn(file, args, {
      cwd: o.cwd,
      env: shellEnv(o.cwd),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: a timeout kills everything it started
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let kept = 0;
    let truncated = false;
    let timedOut = false;
    const parts: string[] = [];
    const take = (stream: 'stdout' | 'stderr') => (buf: Buffer) => {
      if (kept >= o.maxOutputBytes) {
        truncated = true;
        return;
      }
      const room = o.maxOutputBytes - kept;
      const piece = buf.length > room ? buf.subarray(0, room) : buf;
      if (piece.length < buf.length) truncated = true;
      kept += piece.length;
      const text = piece.toString('utf8');
      parts.push(text);
      o.onOutput(stream, text);
    };
    child.stdout.on('data', take('stdout'));
    child.stderr.on('data', take('stderr'));
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, o.timeoutMs);
    const onAbort = () => killGroup();
    o.signal.addEventListener('abort', onAbort, { once: true });
    child.once('error', (err) => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      reject(err);
    });
    child.once('close', (exitCode, signal) => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      killGroup(); // anything it left running in the background goes too
      resolve({ exitCode, signal, timedOut, truncated, output: parts.join(''), durationMs: Date.now() - started });
    });
  });
}

/** `p` inside `root` (relative, no escaping through `..` or symlinks); throws a readable error otherwise. */
export async function insideDisk(root: string, p: string): Promise<string> {
  const rel = p.replace(/^\.\/+/, '');
  if (!rel || path.isAbsolute(rel)) throw new Error(`"${p}" is not a path on the run's disk (use a relative path such as out.json)`);
  const full = path.resolve(root, rel);
  if (full !== root && !full.startsWith(root + path.sep)) throw new Error(`"${p}" is outside the run's disk`);
  // A symlink the command made must not lead out of the disk either.
  const realRoot = await fs.realpath(root);
  let dir = path.dirname(full);
  while (dir.startsWith(root)) {
    const real = await fs.realpath(dir).catch(() => undefined);
    if (real !== undefined) {
      if (real !== realRoot && !real.startsWith(realRoot + path.sep)) throw new Error(`"${p}" is outside the run's disk`);
      break;
    }
    dir = path.dirname(dir);
  }
  const st = await fs.lstat(full).catch(() => undefined);
  if (st?.isSymbolicLink()) {
    const target = await fs.realpath(full).catch(() => undefined);
    if (!target || !target.startsWith(realRoot + path.sep)) throw new Error(`"${p}" is outside the run's disk`);
  }
  return full;
}

/** Every regular file under `root`, as relative paths, sorted. */
export async function listDisk(root: string): Promise<{ path: string; sizeBytes: number }[]> {
  const out: { path: string; sizeBytes: number }[] = [];
  for (const e of await fs.readdir(root, { withFileTypes: true, recursive: true }).catch(() => [])) {
    if (!e.isFile()) continue;
    const full = path.join(e.parentPath, e.name);
    const st = await fs.stat(full).catch(() => undefined);
    if (st) out.push({ path: path.relative(root, full).split(path.sep).join('/'), sizeBytes: st.size });
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * Makes `dir` the parent of run directories: others may pass through it but not list it. As
 * root (commands then run as nobody), DATA_DIR is closed to other users too, so a command can
 * read neither service data nor another project's files.
 */
export async function prepareWorkDir(dir: string, dataDir: string): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  await fs.chmod(dir, 0o711);
  if (shellUser()) await fs.chmod(dataDir, 0o700).catch(() => undefined);
  return dir;
}
