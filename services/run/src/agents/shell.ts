/**
 * The browsercode agent's terminal: one `bash -c` command with the run's disk as working
 * directory, its output streamed as it comes, time, output and disk growth capped, everything
 * killed on timeout or stop. The environment is built from nothing (no service secret can leak
 * into it). In the sandbox (the default) the command runs in namespaces of its own (`unshare`):
 *  - PID and mount, with a fresh /proc: it sees no other process, and when it ends everything it
 *    started ends with it, even what tried to escape with setsid; the chain from the service down
 *    carries a parent-death signal, so a crash of the service ends it too;
 *  - a root of its own (a chroot on a tmpfs): /usr and /etc read-only, its disk at its own path,
 *    private size-capped /tmp, /var/tmp and /dev/shm gone when it ends, a /dev of the harmless
 *    devices and a /proc of its own PIDs; nothing else of the host (no home folders, no checkout,
 *    no service data or other runs' disks, no /sys with the host's cgroups, no host Unix socket:
 *    Postgres trusting local connections, Docker, D-Bus …);
 *  - no_new_privs and a seccomp filter (seccomp.ts): no user namespaces, mounts, ptrace, keyring,
 *    bpf or perf, whatever user it runs as;
 *  - network (unless the host network is allowed): it cannot reach the services' unauthenticated
 *    internal ports, Chromium's DevTools ports or anything else.
 * As root it runs as the run's own uid (see shell-tenancy.ts), in the run's cgroups when there are
 * any; rlimits cap what cgroups do not.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, lstatSync, realpathSync } from 'node:fs';
import fs from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import os from 'node:os';
import path from 'node:path';
import { SECCOMP_LOADER, seccompFilter } from './seccomp.js';

export interface ShellLimits {
  /** Wall-clock limit of one command. */
  timeoutMs: number;
  /** Output kept (and streamed) per command; the rest is counted and dropped. */
  maxOutputBytes: number;
}

/** What one run's commands may use (enforced by cgroups where there are any, else by rlimits). */
export interface ShellCaps {
  maxProcesses: number;
  maxMemoryMb: number;
  /** Percent of one core. */
  maxCpuPercent: number;
  /** How large the run's disk may grow (checked while a command runs). */
  maxDiskMb: number;
  /** Size of the private /tmp and /dev/shm. */
  tmpMb: number;
}

export interface ShellResult {
  exitCode: number | null;
  /** The signal that ended the command (SIGKILL after a timeout or stop). */
  signal: string | null;
  timedOut: boolean;
  /** Output beyond maxOutputBytes was dropped. */
  truncated: boolean;
  /** The command grew the disk beyond its quota and was stopped (bytes the disk held then). */
  diskExceeded?: number | undefined;
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
  /** Caps; undefined = none. */
  caps?: ShellCaps | undefined;
  /** cgroup directories the command joins (the run's). */
  cgroups?: string[] | undefined;
  /** A directory only this service can read (the run's slot), for the sandbox's mount table. */
  scratchDir?: string | undefined;
}

export interface Sandbox {
  network: boolean;
  /** Load the seccomp filter (seccomp.ts); false where the kernel refuses it. Default true. */
  seccomp?: boolean | undefined;
  /** Directories covered with an empty tmpfs (besides the fixed ones). */
  hide?: string[] | undefined;
}

/** How this service runs commands: limits, the user, the sandbox ('unavailable' = required but impossible here: commands are refused). */
export interface Terminal {
  limits: ShellLimits;
  user: { uid: number; gid: number } | undefined;
  sandbox: Sandbox | 'unavailable' | undefined;
  caps?: ShellCaps | undefined;
  /** The run's cgroups (set per run). */
  cgroups?: string[] | undefined;
  /** The run's slot directory (set per run). */
  scratchDir?: string | undefined;
}

/** The account commands run as when this process is root and no run uid is given: `nobody`. */
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
    TMPDIR: '/tmp',
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
 * Directories that hold host sockets or private state on common systems. The sandbox's root shows
 * only the system trees below (read-only) and the run's disk, so these matter only where they lie
 * inside a shown tree; they are covered there too.
 */
export const HIDDEN_DIRS = ['/run', '/var/run', '/tmp', '/var/tmp', '/dev/shm', '/dev/mqueue', '/var/lib/postgresql', '/var/lib/mysql', '/var/spool/postfix'];

/**
 * What a command sees of the host: the programs, libraries and settings a command needs, read-only.
 * Nothing else of the host is in its root: no home folders, no checkout of this project, no
 * service data, no other run's disk, no /sys (host cgroups and PIDs), no host sockets.
 */
export const SHOWN_TREES = ['/usr', '/etc'];
/** Top-level names that are symlinks into /usr on a merged-/usr system, bound read-only where they are directories. */
const USR_LINKS = ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/** `p` is `dir` or below it. */
const under = (p: string, dir: string) => p === dir || p.startsWith(dir.endsWith('/') ? dir : dir + '/');

/**
 * The sandbox's mount table (fstab lines, relative to the new root `R`, mounted after the shown
 * trees): an empty tmpfs over each hidden directory that lies inside a shown tree (symlinks
 * resolved, nested ones dropped), /dev/null over every host socket bound inside one (from
 * /proc/net/unix), and last the run's disk at its own path.
 */
export function sandboxMounts(hide: string[], cwd: string): string {
  const shown = (p: string) => SHOWN_TREES.some((t) => under(p, t));
  const dirs: string[] = [];
  for (const d of hide) {
    try {
      const real = realpathSync(d);
      if (real !== '/' && shown(real) && lstatSync(real).isDirectory()) dirs.push(real);
    } catch {
      /* not on this host */
    }
  }
  const tops = [...new Set(dirs)].sort().filter((d, i, all) => !all.slice(0, i).some((p) => under(d, p)));
  const esc = (p: string) => p.replace(/[\s\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  const lines = tops.map((d) => `ats-sandbox R${esc(d)} tmpfs size=1m,mode=755,nosuid,nodev 0 0`);
  let unix = '';
  try {
    unix = readFileSync('/proc/net/unix', 'utf8');
  } catch {
    /* no procfs: the fixed directories only */
  }
  const sockets = new Set<string>();
  for (const line of unix.split('\n').slice(1)) {
    const named = line.trim().split(/\s+/)[7];
    if (!named?.startsWith('/')) continue;
    try {
      // Through symlinked directories (/var/run → /run) to where the mount would land.
      const p = path.join(realpathSync(path.dirname(named)), path.basename(named));
      if (shown(p) && !tops.some((d) => under(p, d)) && lstatSync(p).isSocket()) sockets.add(p);
    } catch {
      /* gone, or in another mount namespace */
    }
  }
  for (const p of sockets) lines.push(`/dev/null R${esc(p)} none bind 0 0`);
  // Last, the working directory (held open as fd 3 by the setup) at its own path.
  lines.push(`/proc/self/fd/3 R${esc(cwd)} none bind,X-mount.mkdir 0 0`);
  return lines.join('\n') + '\n';
}

/**
 * Runs inside the namespaces, as root there, before the command: joins the run's cgroups, holds
 * the working directory and the mount table open, builds a new root on a tmpfs (mounted over /tmp,
 * which the command gets back as a private tmpfs): the shown trees read-only, a /dev of the
 * harmless devices, a fresh /proc of its PID namespace, private /tmp, /var/tmp and /dev/shm, then
 * the table (covers and the disk); sets the rlimits, chroots there (inside a chroot the kernel
 * refuses new user namespaces, so `unshare -r` fails) and drops to the run's user with
 * no_new_privs (or, in a user namespace, drops every capability, so nothing can be unmounted).
 * Exit 125 = the sandbox could not be made.
 */
const SETUP = `set -u
W=$1 TABLE=$2 CG=$3 LIMITS=$4 DROP=$5 TMP=$6 SHOWN=$7 FILTER=$8 LOADER=$9; shift 9
for c in $CG; do echo 0 > "$c/cgroup.procs" || exit 125; done
exec 3< "$W" 4< "$TABLE" || exit 125
R=/tmp
mount -n -t tmpfs -o size=1m,mode=755,nosuid,nodev ats-root "$R" || exit 125
cd "$R" || exit 125
for t in $SHOWN; do
  mkdir -p ".$t" && mount -n --rbind "$t" ".$t" && mount -n -o remount,bind,ro ".$t" || exit 125
done
for l in ${USR_LINKS.join(' ')}; do
  if [ -L "/$l" ]; then ln -s "$(readlink "/$l")" "$l" || exit 125
  elif [ -d "/$l" ]; then mkdir "$l" && mount -n --rbind "/$l" "$l" && mount -n -o remount,bind,ro "$l" || exit 125; fi
done
mkdir -p proc dev tmp var/tmp run home || exit 125
mount -n -t proc -o nosuid,nodev,noexec proc proc || exit 125
mount -n -t tmpfs -o size=64k,mode=755,nosuid ats-dev dev || exit 125
for d in null zero full random urandom tty; do
  [ -e "/dev/$d" ] || continue
  : > "dev/$d" && mount -n --bind "/dev/$d" "dev/$d" || exit 125
done
ln -s /proc/self/fd dev/fd && ln -s /proc/self/fd/0 dev/stdin && ln -s /proc/self/fd/1 dev/stdout && ln -s /proc/self/fd/2 dev/stderr || exit 125
mkdir dev/shm || exit 125
for d in tmp var/tmp dev/shm; do mount -n -t tmpfs -o "size=\${TMP}m,mode=1777,nosuid,nodev" ats-sandbox "$d" || exit 125; done
sed "s# R/# $R/#" /proc/self/fd/4 > "$R/.table" && mount -n --no-canonicalize -a -T "$R/.table" || exit 125
rm -f "$R/.table"
exec 3<&- 4<&-
if [ -n "$LIMITS" ]; then ulimit -S -H $LIMITS || exit 125; fi
exec /usr/sbin/chroot "$R" /bin/bash -c 'cd -- "$1" || exit 125; DROP=$2 FILTER=$3; shift 3
if [ -n "$FILTER" ]; then exec setpriv $DROP --pdeathsig KILL -- /usr/bin/perl -e "$2" "$FILTER" "$1"; fi
exec setpriv $DROP --pdeathsig KILL -- /bin/bash -c "$1"' chroot "$W" "$DROP" "$FILTER" "$1" "$LOADER"`;

/**
 * The program and arguments that run `command`: bash, behind `unshare` in the sandbox (with the
 * setup above, as only root may make the mounts; without root a user namespace makes them
 * possible). `table` is the path of the mount table file.
 */
export function shellArgv(
  command: string,
  o: Pick<ShellOptions, 'user' | 'sandbox' | 'caps' | 'cgroups' | 'timeoutMs' | 'cwd'>,
  table?: string,
): { file: string; args: string[]; user?: { uid: number; gid: number } | undefined } {
  const bash = ['/bin/bash', '-c', command];
  if (!o.sandbox) return { file: bash[0]!, args: bash.slice(1), user: o.user };
  const root = process.getuid?.() === 0;
  const ns = ['--pid', '--fork', '--kill-child', '--mount', '--mount-proc', '--propagation', 'private', ...(o.sandbox.network ? [] : ['--net'])];
  const drop = root && o.user ? `--reuid=${o.user.uid} --regid=${o.user.gid} --clear-groups --no-new-privs` : '--inh-caps=-all --bounding-set=-all --no-new-privs';
  const cgroups = o.cgroups ?? [];
  const limits: string[] = [];
  if (o.caps) {
    // RLIMIT_NPROC counts the processes of the uid: per run when each run has its own uid (in a
    // user namespace of its own, those of the namespace).
    limits.push(`-u ${o.caps.maxProcesses}`);
    // One file may not be larger than the disk quota (+1 byte, so that reaching it shows as exceeding it).
    limits.push(`-f ${Math.ceil((o.caps.maxDiskMb * 1024 * 1024 + 1) / 1024)}`);
    if (!cgroups.some((c) => c.includes('/memory/'))) limits.push(`-v ${o.caps.maxMemoryMb * 1024}`);
    if (!cgroups.some((c) => c.includes('/cpu/'))) limits.push(`-t ${Math.max(1, Math.ceil(((o.timeoutMs / 1000) * o.caps.maxCpuPercent) / 100))}`);
  }
  const tmpMb = o.caps?.tmpMb ?? 64;
  const filter = o.sandbox.seccomp === false ? '' : (seccompFilter()?.toString('hex') ?? '');
  const inner = [...ns, '--', '/bin/bash', '-c', SETUP, 'sandbox', o.cwd, table ?? '/dev/null', cgroups.join(' '), limits.join(' '), drop, String(tmpMb), SHOWN_TREES.join(' '), filter, SECCOMP_LOADER, command];
  const userns = root ? [] : ['--user', '--map-root-user'];
  // setpriv first: unshare (and through --kill-child the command) dies with this process.
  return { file: 'setpriv', args: ['--pdeathsig', 'KILL', '--', 'unshare', ...userns, ...inner] };
}

/** Whether the sandbox works here (unshare or mount may be refused, e.g. by a container's seccomp profile); probed once at start. */
export async function canSandbox(user: { uid: number; gid: number } | undefined, sandbox: Sandbox, scratchDir?: string): Promise<boolean> {
  const scratch = scratchDir ?? (await fallbackScratch());
  // Inside, the command is PID 1 of its namespace, /run is empty, and without network only `lo` is listed (two header lines and one device).
  const check = `test $$ -eq 1 && test -z "$(ls -A /run)"${sandbox.network ? '' : ' && test "$(wc -l < /proc/net/dev)" -le 3'}`;
  const dir = await fs.mkdtemp(path.join(scratch, 'probe-'));
  try {
    await giveTo(dir, user);
    const table = path.join(scratch, `${path.basename(dir)}.fstab`);
    await fs.writeFile(table, sandboxMounts([...HIDDEN_DIRS, ...(sandbox.hide ?? [])], dir));
    const { file, args, user: as } = shellArgv(check, { user, sandbox, cwd: dir, timeoutMs: 5000 }, table);
    const r = spawnSync(file, args, { stdio: 'ignore', env: shellEnv(dir), cwd: '/', timeout: 5000, ...(as ? { uid: as.uid, gid: as.gid } : {}) });
    await fs.rm(table, { force: true });
    return r.status === 0;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Bytes of the regular files under `dir` (apparent sizes: what storing them would take). */
export async function diskUsage(dir: string): Promise<number> {
  let total = 0;
  for (const e of await fs.readdir(dir, { withFileTypes: true, recursive: true }).catch(() => [])) {
    if (!e.isFile()) continue;
    const st = await fs.lstat(path.join(e.parentPath, e.name)).catch(() => undefined);
    if (st) total += st.size;
  }
  return total;
}

export function runShell(command: string, o: ShellOptions): Promise<ShellResult> {
  const started = Date.now();
  const stopped = (): ShellResult => ({ exitCode: null, signal: 'SIGKILL', timedOut: false, truncated: false, output: '', durationMs: Date.now() - started });
  if (o.signal.aborted) return Promise.resolve(stopped());
  return prepare(o).then(async ({ table, quota }) => {
    // A stop while the command was being prepared: nothing starts (the listener below would never hear it).
    if (o.signal.aborted) {
      if (table) await fs.rm(table, { force: true });
      return stopped();
    }
    return new Promise<ShellResult>((resolve, reject) => {
      const { file, args, user } = shellArgv(command, o, table);
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
      let diskExceeded: number | undefined;
      let ended = false;
      const parts: string[] = [];
      // Text split across reads stays whole (a character is decoded once all its bytes came); bytes that are not UTF-8 become U+FFFD.
      const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
      const emit = (stream: 'stdout' | 'stderr', text: string) => {
        if (!text) return;
        parts.push(text);
        o.onOutput(stream, text);
      };
      const take = (stream: 'stdout' | 'stderr') => (buf: Buffer) => {
        if (kept >= o.maxOutputBytes) {
          truncated = true;
          return;
        }
        const room = o.maxOutputBytes - kept;
        const piece = buf.length > room ? buf.subarray(0, room) : buf;
        if (piece.length < buf.length) truncated = true;
        kept += piece.length;
        emit(stream, decoders[stream].write(piece));
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
      // The disk is measured while the command runs; a walk of a large tree is repeated less often.
      let poll: NodeJS.Timeout | undefined;
      const measure = async () => {
        const t0 = Date.now();
        const used = await diskUsage(o.cwd);
        if (ended) return;
        if (used > quota!) {
          diskExceeded = used;
          killGroup();
          return;
        }
        poll = setTimeout(() => void measure(), Math.max(200, (Date.now() - t0) * 4));
      };
      if (quota !== undefined) poll = setTimeout(() => void measure(), 200);
      const onAbort = () => killGroup();
      o.signal.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => {
        ended = true;
        clearTimeout(timer);
        clearTimeout(poll);
        o.signal.removeEventListener('abort', onAbort);
        if (table) void fs.rm(table, { force: true });
      };
      child.once('error', (err) => {
        cleanup();
        reject(err);
      });
      child.once('close', (exitCode, signal) => {
        cleanup();
        for (const stream of ['stdout', 'stderr'] as const) emit(stream, decoders[stream].end());
        killGroup(); // anything it left running in the background goes too
        const done = (exceeded: number | undefined) =>
          resolve({ exitCode, signal, timedOut, truncated, diskExceeded: exceeded, output: parts.join(''), durationMs: Date.now() - started });
        if (quota === undefined || diskExceeded !== undefined) return done(diskExceeded);
        // What it wrote between the last check and its end counts too.
        void diskUsage(o.cwd).then((used) => done(used > quota ? used : undefined));
      });
    });
  });
}

/** Where mount tables go when the command has no slot of its own: a directory only this user can read. */
async function fallbackScratch(): Promise<string> {
  const dir = path.join(os.tmpdir(), `ats-shell-${process.getuid?.() ?? 0}`);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await fs.lstat(dir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? 0)) throw new Error(`${dir} belongs to someone else`);
  await fs.chmod(dir, 0o700);
  return dir;
}

/** The mount table of this command (when sandboxed) and the disk size it may grow the disk to. */
async function prepare(o: ShellOptions): Promise<{ table?: string | undefined; quota?: number | undefined }> {
  let table: string | undefined;
  if (o.sandbox) {
    const scratch = o.scratchDir ?? (await fallbackScratch());
    table = path.join(scratch, `fstab-${process.pid}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`);
    await fs.writeFile(table, sandboxMounts([...HIDDEN_DIRS, ...(o.sandbox.hide ?? [])], o.cwd), { mode: 0o600 });
  }
  // A disk that was already larger (attached files) may not grow further.
  const quota = o.caps ? Math.max(o.caps.maxDiskMb * 1024 * 1024, await diskUsage(o.cwd)) : undefined;
  return { table, quota };
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
