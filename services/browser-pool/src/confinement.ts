/**
 * How browsers are confined on this host, decided once at start and logged, so an operator sees
 * what a visited page could reach. Where the pool runs as root (the default container and `make
 * up`), each Chromium:
 *  - runs as a uid of its own (from BROWSER_UID_BASE), so it can read no service data and no
 *    other browser's profile, with Chromium's own sandbox on (it needs unprivileged user
 *    namespaces, which are probed);
 *  - lives in mount and PID namespaces of its own: every top-level directory except the system
 *    ones (/usr, /etc, …) is covered by an empty tmpfs (DATA_DIR, /root, /home, /var, /run with
 *    its Unix sockets, …), its own directory is mounted back at the same path, /tmp and /dev/shm
 *    are private, and a managed policy refuses file:, chrome: and other internal schemes;
 *  - gets an environment built from nothing.
 * Without root the namespaces are made inside a user namespace (where the kernel and the
 * container's seccomp profile allow it): browsers then share the pool's uid, but each sees only
 * its own folder. Without either only what needs no privilege is kept (empty environment, internal
 * URLs refused at the CDP proxy, the sandbox when user namespaces work); the start log says so.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';
import { processStartTime } from '../../common/src/process-start.js';

/** What a browser launch gets from the pool's confinement. */
export interface BrowserConfinement {
  /** First uid (and gid) of the range browsers run as; undefined = as this process. */
  uidBase: number | undefined;
  /** Mount (and PID) namespaces that hide the host: made as root, or inside a user namespace of the pool's own user. */
  namespaces: boolean;
  /** The namespaces are made in a user namespace (the pool is not root): browsers keep the pool's uid. */
  userns: boolean;
  /** A PID namespace with its own /proc (containers that mask /proc refuse it). */
  pidNamespace: boolean;
  /**
   * A network namespace with only loopback: the browser's one way out is a forwarder (socat) to
   * its egress proxy's Unix socket, so nothing it does (or a compromised Chromium does) reaches the
   * network, the host's abstract Unix sockets or a port past the proxy.
   */
  netNamespace: boolean;
  /** Chromium's own sandbox. */
  sandbox: boolean;
  /**
   * A directory mounted over Chromium's policy directory (`/etc/chromium`) inside the namespace;
   * undefined where Chromium has none or there is no namespace.
   */
  policyDir: string | undefined;
}

export interface ConfinementSettings {
  /** `auto`: as much as this host allows; `off`: none (unsafe, for debugging). */
  mode: 'auto' | 'off';
  uidBase: number;
  /** CHROMIUM_NO_SANDBOX when given; undefined = on wherever user namespaces work. */
  noSandbox: boolean | undefined;
  /** Where the managed policy is written (a directory of the pool's own). */
  policyDir: string;
}

/** Schemes no browser may open: host files, internal pages, extensions. */
export const BLOCKED_SCHEMES = ['file', 'chrome', 'chrome-untrusted', 'devtools', 'view-source', 'chrome-extension', 'chrome-search', 'filesystem'];

/** The managed Chromium policy every confined browser gets. */
export const CHROMIUM_POLICY = {
  URLBlocklist: BLOCKED_SCHEMES.map((s) => (s === 'view-source' || s === 'filesystem' ? `${s}:*` : `${s}://*`)),
  // Chromium's own UI pages (headless keeps the omnibox popup): blocked, they would turn into error pages that look like tabs.
  URLAllowlist: ['chrome://omnibox-popup.top-chrome'],
  // Page-visible WebRTC may use no UDP path that skips the egress proxy.
  WebRtcIPHandlingPolicy: 'disable_non_proxied_udp',
  AllowFileSelectionDialogs: false,
  PromptForDownloadLocation: false,
  BrowserSignin: 0,
  SyncDisabled: true,
  PasswordManagerEnabled: false,
};

/** Where Debian's Chromium reads machine policies (`<dir>/policies/managed/*.json`). */
export const CHROMIUM_ETC = '/etc/chromium';

const ok = (file: string, args: string[]) => spawnSync(file, args, { stdio: 'ignore', timeout: 5000, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }).status === 0;

/** Probes the host once and says what browsers get. */
export function detectConfinement(s: ConfinementSettings, logger: Logger): BrowserConfinement {
  const root = process.getuid?.() === 0;
  // Chromium makes its sandbox's user namespaces as the browser's uid, not as root: probe as that uid.
  const asBrowser = root && s.mode !== 'off' ? ['setpriv', `--reuid=${s.uidBase}`, `--regid=${s.uidBase}`, '--clear-groups', '--'] : [];
  const userns = ok(asBrowser[0] ?? 'unshare', [...asBrowser.slice(1), ...(asBrowser.length ? ['unshare'] : []), '--user', '--map-root-user', 'true']);
  if (s.mode === 'off') {
    logger.warn('BROWSER_CONFINEMENT=off: browsers run as this process, with its files in reach');
    return { uidBase: undefined, namespaces: false, userns: false, pidNamespace: false, netNamespace: false, sandbox: s.noSandbox === undefined ? !root && userns : !s.noSandbox, policyDir: undefined };
  }
  // The namespaces a browser gets: the first of these this host lets us make (and mount in).
  const forwarder = ok('/bin/sh', ['-c', 'command -v socat && command -v ip && command -v ss']);
  const candidates = [true, false].flatMap((pidNamespace) =>
    [forwarder, false].map((netNamespace) => ({ userns: !root, pidNamespace, netNamespace })),
  );
  const made = candidates.find(
    (c) => (root || userns) && ok('unshare', [...namespaceArgs(c), '--', '/bin/sh', '-c', `mount -t tmpfs ats-probe /run${c.netNamespace ? ' && ip link set lo up' : ''}`]),
  );
  const namespaces = made !== undefined;
  const sandbox = s.noSandbox === undefined ? userns : !s.noSandbox;
  let policyDir: string | undefined;
  if (namespaces && fs.existsSync(CHROMIUM_ETC)) {
    policyDir = s.policyDir;
    const managed = path.join(policyDir, 'policies', 'managed');
    fs.mkdirSync(managed, { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(managed, 'ats.json'), JSON.stringify(CHROMIUM_POLICY, null, 2), { mode: 0o644 });
    for (let d = managed; d.startsWith(policyDir); d = path.dirname(d)) fs.chmodSync(d, 0o755);
  }
  const c: BrowserConfinement = {
    uidBase: root && namespaces ? s.uidBase : undefined,
    namespaces,
    userns: made?.userns ?? false,
    pidNamespace: made?.pidNamespace ?? false,
    netNamespace: made?.netNamespace ?? false,
    sandbox,
    policyDir,
  };
  const missing = [
    !root && 'a uid per browser (the pool does not run as root; each browser still sees only its own folder)',
    !namespaces && (root ? 'mount namespaces (unshare is refused here)' : 'mount namespaces (no user namespaces here: the seccomp profile or the kernel refuses them)'),
    namespaces &&
      !c.pidNamespace &&
      `a PID namespace (mounting /proc is refused here, e.g. a container that masks /proc)${c.uidBase === undefined ? ": browsers share this process's uid and see its /proc, environment included — keep secrets in files (INTERNAL_TOKEN_FILE) or allow an unmasked /proc" : ''}`,
    !sandbox && "Chromium's sandbox (no unprivileged user namespaces, or CHROMIUM_NO_SANDBOX=true)",
    namespaces && !c.netNamespace && `a network namespace (${forwarder ? 'refused here' : 'socat, ip and ss are needed: apt-get install socat iproute2'}; the egress proxy still carries every request Chromium makes)`,
    namespaces && !policyDir && `the managed policy (${CHROMIUM_ETC} does not exist; internal schemes are refused at the CDP proxy only)`,
  ].filter(Boolean);
  if (missing.length) logger.warn({ confinement: c, missing }, `browsers are confined only partly; missing: ${missing.join('; ')}`);
  else logger.info({ confinement: c }, 'browsers confined: own uid, sandbox, mount and PID namespaces, managed policy');
  return c;
}

/** `unshare` options that make a browser's namespaces. */
export function namespaceArgs(c: { userns: boolean; pidNamespace: boolean; netNamespace: boolean }): string[] {
  const user = c.userns ? ['--user', `--map-user=${process.getuid?.() ?? 0}`, `--map-group=${process.getgid?.() ?? 0}`, '--keep-caps'] : [];
  return [...user, '--mount', '--propagation', 'private', ...(c.netNamespace ? ['--net'] : []), ...(c.pidNamespace ? ['--pid', '--fork', '--kill-child', '--mount-proc'] : [])];
}

/** Where a browser in a network namespace reaches its egress proxy: a Unix socket in its own folder. */
export function egressSocketPath(rootDir: string, id: string): string {
  return path.join(rootDir, id, 'egress.sock');
}

/** The port of the forwarder on a namespaced browser's own loopback (`--proxy-server`). */
export const FORWARDER_PORT = 3128;

/**
 * A Unix socket path must stay under 108 bytes: where browsers' folders lie too deep for their
 * egress socket, they go without the network namespace (said once, at start).
 */
export function fitToRoot(c: BrowserConfinement, rootDir: string, logger: Logger): BrowserConfinement {
  const longest = egressSocketPath(path.resolve(rootDir), `brw_${'x'.repeat(24)}`);
  if (!c.netNamespace || Buffer.byteLength(longest) < 104) return c;
  logger.warn({ rootDir }, 'browser folders lie too deep for a Unix socket path: browsers go without a network namespace (set DATA_DIR to a shorter path)');
  return { ...c, netNamespace: false };
}

/** Uids handed to live browsers of this process (→ the claim written for it); a uid is reused only once its browser's processes are gone. */
const uidsInUse = new Map<number, { claim: string }>();
const UID_RANGE = 10000;

/**
 * The host's registry of browser uids taken: one file per uid naming the process that holds it
 * (pid and start time): the pool while it launches the browser, then the browser's supervisor,
 * which outlives the pool. Every pool on this host (another replica, another checkout's `make up`)
 * shares it, so two pools never give their browsers one uid, which would let one stack's pages
 * signal or read the other's browsers. A file whose process is gone is stale and taken over.
 * One registry whatever BROWSER_UID_BASE: pools whose ranges overlap skip each other's uids.
 */
const registryDir = () => path.join(os.tmpdir(), `ats-browser-uids-${process.getuid?.() ?? 0}`);

const claimOf = (holder: { pid: number; start: number }) => JSON.stringify({ pid: holder.pid, start: holder.start });
const MY_CLAIM = claimOf({ pid: process.pid, start: processStartTime(process.pid) ?? 0 });

/** Claims `uid` in the host registry; false when a live process (another pool, or another browser's supervisor) holds it. */
function claimOnHost(dir: string, uid: number): boolean {
  const file = path.join(dir, String(uid));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, MY_CLAIM, { flag: 'wx', mode: 0o600 });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder: { pid: number; start: number } | undefined;
    try {
      holder = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid: number; start: number };
    } catch {
      /* half written or gone: looked at again below */
    }
    if (holder && (holder.pid === process.pid || processStartTime(holder.pid) === holder.start)) return false;
    fs.rmSync(file, { force: true }); // its process is gone
  }
  return false;
}

/** Takes the lowest uid of the range that neither this process nor another pool on this host holds. */
export function takeUid(base: number): number {
  const dir = registryDir();
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (let uid = base; uid < base + UID_RANGE; uid++) {
    if (!uidsInUse.has(uid) && claimOnHost(dir, uid)) {
      uidsInUse.set(uid, { claim: MY_CLAIM });
      return uid;
    }
  }
  throw new Error(`no free browser uid in ${base}..${base + UID_RANGE - 1} (other pools on this host hold the rest)`);
}

/** Hands a uid's claim to the browser's supervisor: it stays taken while the browser runs, whatever becomes of this process. */
export function handUid(uid: number, holder: { pid: number; start: number }): void {
  const held = uidsInUse.get(uid);
  if (!held) return;
  const file = path.join(registryDir(), String(uid));
  fs.writeFileSync(`${file}.tmp`, claimOf(holder), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
  held.claim = claimOf(holder);
}

/** Counts a uid held by a browser taken over after a restart (its supervisor's claim stays) as this process's. */
export function adoptUid(uid: number): void {
  let claim = MY_CLAIM;
  try {
    claim = fs.readFileSync(path.join(registryDir(), String(uid)), 'utf8');
  } catch {
    /* its claim is gone: the in-process set still keeps it from this pool's next browsers */
  }
  uidsInUse.set(uid, { claim });
}

export function releaseUid(uid: number): void {
  const held = uidsInUse.get(uid);
  uidsInUse.delete(uid);
  if (!held) return;
  const file = path.join(registryDir(), String(uid));
  try {
    if (fs.readFileSync(file, 'utf8') === held.claim) fs.rmSync(file, { force: true });
  } catch {
    /* not claimed */
  }
}

/**
 * The shell script that builds a browser's view of the host inside fresh mount and PID
 * namespaces, then drops to the browser's uid (or, in a user namespace, every capability) and
 * starts Chromium. Arguments: the browser's directory, uid ('' = keep), the policy directory
 * ('' for none), the egress proxy's Unix socket ('' = no network namespace), then the command.
 * In a network namespace, loopback comes up and a forwarder (socat, as the browser's uid) carries
 * connections to 127.0.0.1:3128 to the egress proxy's socket.
 */
export const NAMESPACE_SCRIPT = String.raw`set -eu
dir="$1"; uid="$2"; policy="$3"; egress="$4"; shift 4
mount -t tmpfs -o mode=755,size=1m ats-run /run
mkdir /run/.dir /run/.fonts
mount --bind "$dir" /run/.dir
if [ -d /var/cache/fontconfig ]; then mount --bind /var/cache/fontconfig /run/.fonts; fi
if [ -n "$policy" ]; then mkdir /run/.policy; mount --bind "$policy" /run/.policy; fi
for d in /*; do
  case "$d" in /usr|/lib|/lib32|/lib64|/libx32|/bin|/sbin|/etc|/proc|/dev|/sys|/run) continue;; esac
  if [ -d "$d" ] && [ ! -L "$d" ]; then mount -t tmpfs -o mode=755,size=1m ats-hidden "$d"; fi
done
mount -t tmpfs -o mode=1777,size=512m ats-tmp /tmp
mount -t tmpfs -o mode=1777,size=1g ats-shm /dev/shm
mkdir -p "$dir" /var/cache/fontconfig
mount --bind /run/.dir "$dir"
mount --bind /run/.fonts /var/cache/fontconfig
if [ -n "$policy" ]; then mount --bind /run/.policy /etc/chromium; mount -o remount,bind,ro /etc/chromium; umount /run/.policy; fi
umount /run/.dir /run/.fonts
rm -rf /run/.dir /run/.fonts /run/.policy
# What the forwarder and the browser drop to: the browser's own uid, else no capabilities (uid is a number: no quoting needed).
if [ -n "$uid" ]; then priv="--reuid=$uid --regid=$uid --clear-groups"; else priv="--inh-caps=-all --ambient-caps=-all"; fi
if [ -n "$egress" ]; then
  ip link set lo up
  setpriv $priv --no-new-privs -- socat TCP-LISTEN:${FORWARDER_PORT},bind=127.0.0.1,fork,reuseaddr "UNIX-CONNECT:$egress" </dev/null 2>/dev/null &
  i=0; until ss -ltnH 'sport = :${FORWARDER_PORT}' | grep -q . || [ $i -ge 200 ]; do sleep 0.01; i=$((i + 1)); done
fi
exec setpriv $priv --no-new-privs -- "$@"
`;
