/**
 * Who a run's commands are, and what is left when it ends. Each run holds a slot of this host's
 * registry for the uid range (/tmp/ats-shell-slots-<service uid>-<SHELL_UID_BASE>: every run
 * service on the host that uses the range shares it, whatever its RUN_WORK_DIR or TMPDIR) while it executes: slot n gives its commands the uid/gid SHELL_UID_BASE+n
 * (when the service is root), cgroup v1 directories capping processes, memory and CPU (where
 * /sys/fs/cgroup allows), and records the owner (pid and start time of this process) and the run.
 * When the run ends, its slot is released: every process of the uid and of the cgroups is killed,
 * the cgroups and the work folder removed. At start, the service reaps what a dead owner left: a
 * slot whose process is gone (or whose pid now belongs to another process) is released the same
 * way; a slot of a live process (another run service on this host) is left alone. Reaping and
 * taking a slot exclude each other (a lock in the registry), so a reaper never takes a slot that
 * another service took while it looked for an orphan, and never kills that run's commands.
 */
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { waitForLock } from '../../../common/src/lock-file.js';
import type { Logger } from '../../../common/src/logger.js';
import { processStartTime } from '../../../common/src/process-start.js';
import type { ShellCaps } from './shell.js';

const CONTROLLERS = ['pids', 'memory', 'cpu'] as const;
type Controller = (typeof CONTROLLERS)[number];
const CGROUP_ROOT = '/sys/fs/cgroup';
/** The parent of every run's cgroups, in each hierarchy. */
const CGROUP_PARENT = 'ats-shell';

export interface TenancyOptions {
  workDir: string;
  uidBase: number;
  uidCount: number;
  caps: ShellCaps;
  cgroups: 'auto' | 'off';
  logger: Logger;
  /** The slot registry; default <tmp>/ats-shell-slots-<uid>-<uidBase>. */
  slotsDir?: string | undefined;
}

/** One run's hold on the terminal: its user, cgroups, work folder and slot. */
export interface Tenant {
  runId: string;
  /** The run's work folder (its disk). */
  dir: string;
  /** undefined when the service is not root (commands then run in a user namespace). */
  user: { uid: number; gid: number } | undefined;
  cgroups: string[];
  /** A directory only the service reads (the sandbox's mount tables go there). */
  scratchDir: string;
  /** Kills everything the run started, removes its cgroups, work folder and slot. Idempotent. */
  release(): Promise<void>;
}

interface Owner {
  pid: number;
  /** Start time of the pid (clock ticks after boot): a reused pid is another process. */
  start: number;
  runId: string;
  /** The run's work folder. */
  dir: string;
}

/**
 * The registry of a uid range: one per host, whatever TMPDIR says. The uids and their cgroups are
 * the host's: a run service started with another TMPDIR (`make test`'s stacks beside `make up`)
 * kept a registry of its own and reaped the other's commands as orphans. In /tmp, or in the temp
 * folder where /tmp cannot be written.
 */
export function defaultSlots(uidBase: number): string {
  const name = `ats-shell-slots-${process.getuid?.() ?? 0}-${uidBase}`;
  try {
    accessSync('/tmp', constants.W_OK);
    return path.join('/tmp', name);
  } catch {
    return path.join(os.tmpdir(), name);
  }
}

const MY_START = processStartTime(process.pid) ?? 0;
const alive = (o: Owner) => processStartTime(o.pid) === o.start;

/** Every process whose real or effective uid is one of `uids`. */
function processesOf(uids: Set<number>): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const m = /^Uid:\s+(\d+)\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      if (m && (uids.has(Number(m[1])) || uids.has(Number(m[2])))) out.push(Number(p));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** SIGKILLs what `find` lists until it lists nothing (a fork between reading and killing is caught by the next round). */
async function killAll(find: () => number[] | Promise<number[]>): Promise<number> {
  let killed = 0;
  for (let round = 0; round < 50; round++) {
    const pids = (await find()).filter((p) => p !== process.pid);
    if (!pids.length) return killed;
    for (const p of pids) {
      try {
        process.kill(p, 'SIGKILL');
        killed++;
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return killed;
}

/** This process's turns on each registry (the lock file is per process: its own pid counts as stale). */
const turns = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` holding the registry's lock: one reap or slot taking at a time on the host. Waits for
 * the holder (a reap takes well under a second), up to a minute.
 */
function exclusively<T>(slots: string, fn: () => Promise<T>): Promise<T> {
  const turn = (turns.get(slots) ?? Promise.resolve()).then(async () => {
    const lock = await waitForLock(path.join(slots, '.lock'), 60_000, 10);
    try {
      return await fn();
    } finally {
      lock.release();
    }
  });
  turns.set(slots, turn.catch(() => undefined));
  return turn;
}

const cgroupProcs = async (dir: string) =>
  (await fs.readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map(Number);

export class ShellTenancy {
  readonly #o: TenancyOptions;
  readonly #slots: string;
  readonly #root = process.getuid?.() === 0;
  /** cgroup v1 hierarchies usable here (root, mounted, writable). */
  readonly controllers: Controller[];

  private constructor(o: TenancyOptions, controllers: Controller[]) {
    this.#o = o;
    this.#slots = o.slotsDir ?? defaultSlots(o.uidBase);
    this.controllers = controllers;
  }

  /** Prepares the slot directory and finds the cgroup hierarchies this process may use. */
  static async open(o: TenancyOptions): Promise<ShellTenancy> {
    const slots = o.slotsDir ?? defaultSlots(o.uidBase);
    await fs.mkdir(slots, { recursive: true, mode: 0o700 });
    const st = await fs.lstat(slots);
    if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? 0)) throw new Error(`${slots} is not a directory of this user`);
    await fs.chmod(slots, 0o700);
    const controllers: Controller[] = [];
    if (o.cgroups === 'auto' && process.getuid?.() === 0) {
      for (const c of CONTROLLERS) {
        const parent = path.join(CGROUP_ROOT, c, CGROUP_PARENT);
        try {
          await fs.mkdir(parent, { recursive: true });
          await fs.access(path.join(parent, 'cgroup.procs'));
          controllers.push(c);
        } catch {
          /* not mounted, read-only, or cgroup v2: rlimits instead */
        }
      }
    }
    return new ShellTenancy(o, controllers);
  }

  /** One line for the start log: what confines commands here. */
  describe(): Record<string, unknown> {
    const { uidBase, uidCount, caps } = this.#o;
    const by = (c: Controller, rlimit: string) => (this.controllers.includes(c) ? `cgroup ${c}` : rlimit);
    return {
      users: this.#root ? `own uid per run (${uidBase}-${uidBase + uidCount - 1})` : 'user namespace (the service user, capabilities dropped)',
      processes: `${caps.maxProcesses} (${[this.controllers.includes('pids') ? 'cgroup pids' : undefined, 'RLIMIT_NPROC'].filter(Boolean).join(' + ')})`,
      memoryMb: `${caps.maxMemoryMb} (${by('memory', 'RLIMIT_AS per process')})`,
      cpuPercent: `${caps.maxCpuPercent} (${by('cpu', 'RLIMIT_CPU per process')})`,
      diskMb: `${caps.maxDiskMb} (checked while a command runs; RLIMIT_FSIZE per file)`,
      tmpMb: caps.tmpMb,
    };
  }

  #cgroupDir(c: Controller, uid: number): string {
    return path.join(CGROUP_ROOT, c, CGROUP_PARENT, `u${uid}`);
  }

  /** Kills everything of slot n and removes its cgroups. */
  async #clear(n: number): Promise<number> {
    const uid = this.#o.uidBase + n;
    let killed = 0;
    for (const c of this.controllers) {
      const dir = this.#cgroupDir(c, uid);
      killed += await killAll(() => cgroupProcs(dir));
    }
    if (this.#root) killed += await killAll(() => processesOf(new Set([uid])));
    for (const c of this.controllers) await fs.rmdir(this.#cgroupDir(c, uid)).catch(() => undefined);
    return killed;
  }

  /** Makes slot n's cgroups with the caps; returns their directories. */
  async #makeCgroups(n: number): Promise<string[]> {
    const uid = this.#o.uidBase + n;
    const { caps } = this.#o;
    const dirs: string[] = [];
    for (const c of this.controllers) {
      const dir = this.#cgroupDir(c, uid);
      await fs.mkdir(dir, { recursive: true });
      const set = (file: string, value: string | number) => fs.writeFile(path.join(dir, file), String(value));
      if (c === 'pids') await set('pids.max', caps.maxProcesses);
      if (c === 'memory') {
        const bytes = caps.maxMemoryMb * 1024 * 1024;
        await set('memory.limit_in_bytes', bytes);
        await set('memory.memsw.limit_in_bytes', bytes).catch(() => undefined); // only with swap accounting
      }
      if (c === 'cpu') {
        await set('cpu.cfs_period_us', 100000);
        await set('cpu.cfs_quota_us', caps.maxCpuPercent * 1000);
      }
      dirs.push(dir);
    }
    return dirs;
  }

  async #owner(slot: string): Promise<Owner | undefined> {
    try {
      return JSON.parse(await fs.readFile(path.join(this.#slots, slot, 'owner.json'), 'utf8')) as Owner;
    } catch {
      return undefined;
    }
  }

  /** Takes a free slot for `runId` (atomically: a prepared directory renamed into place). */
  async acquire(runId: string): Promise<Tenant> {
    const { uidBase, uidCount, workDir } = this.#o;
    const dir = path.join(workDir, runId);
    const draft = path.join(this.#slots, `.new-${process.pid}-${Math.random().toString(36).slice(2)}`);
    await fs.mkdir(draft, { mode: 0o700 });
    await fs.writeFile(path.join(draft, 'owner.json'), JSON.stringify({ pid: process.pid, start: MY_START, runId, dir } satisfies Owner));
    const n = await exclusively(this.#slots, async () => {
      for (let i = 0; i < uidCount; i++) {
        try {
          await fs.rename(draft, path.join(this.#slots, String(i)));
          return i;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
        }
      }
      return -1;
    }).catch(async (err: unknown) => {
      await fs.rm(draft, { recursive: true, force: true });
      throw err;
    });
    if (n < 0) {
      await fs.rm(draft, { recursive: true, force: true });
      throw new Error(`no terminal slot is free (SHELL_UID_COUNT=${uidCount} runs hold one on this host)`);
    }
    const slotDir = path.join(this.#slots, String(n));
    const uid = uidBase + n;
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await this.#clear(n);
      await fs.rm(dir, { recursive: true, force: true });
      // Moved aside first: a reaper sees the slot whole or not at all (never without its owner).
      const gone = path.join(this.#slots, `.gone-${process.pid}-${Math.random().toString(36).slice(2)}`);
      await fs.rename(slotDir, gone).catch(() => undefined);
      await fs.rm(gone, { recursive: true, force: true });
    };
    try {
      await this.#clear(n); // nothing of an earlier holder may be left
      const cgroups = await this.#makeCgroups(n);
      return { runId, dir, user: this.#root ? { uid, gid: uid } : undefined, cgroups, scratchDir: slotDir, release };
    } catch (err) {
      await release();
      throw err;
    }
  }

  /**
   * Releases what dead owners left: their slots (processes, cgroups, work folders), processes and
   * cgroups of this uid range that no live slot holds, and work folders of runs the database says
   * have ended (`state` answers for a run id; unknown ids are not this service's and are kept).
   */
  async reap(state: (runId: string) => Promise<'running' | 'ended' | 'unknown'>): Promise<{ slots: number; processes: number; folders: number }> {
    const { uidBase, uidCount, workDir, logger } = this.#o;
    const live = new Set<number>();
    const liveRuns = new Set<string>();
    let slots = 0;
    let processes = 0;
    let folders = 0;
    await exclusively(this.#slots, async () => {
      for (const name of await fs.readdir(this.#slots)) {
        const full = path.join(this.#slots, name);
        if (name.startsWith('.new-') || name.startsWith('.gone-')) {
          const pid = Number(name.split('-')[1]);
          if (processStartTime(pid) === undefined) await fs.rm(full, { recursive: true, force: true });
          continue;
        }
        const n = Number(name);
        if (!Number.isInteger(n) || n < 0 || n >= uidCount) continue;
        const owner = await this.#owner(name);
        if (!owner && !(await fs.stat(full).catch(() => undefined))) continue; // released while we looked
        if (owner && alive(owner)) {
          live.add(n);
          liveRuns.add(owner.runId);
          continue;
        }
        processes += await this.#clear(n);
        if (owner?.dir && path.basename(owner.dir) === owner.runId) await fs.rm(owner.dir, { recursive: true, force: true });
        await fs.rm(full, { recursive: true, force: true });
        slots++;
        logger.info({ runId: owner?.runId, slot: n, ownerPid: owner?.pid }, 'reaped the terminal of a run whose service is gone');
      }
      // Processes and cgroups of the range that no live slot explains (e.g. a slot directory lost with its disk).
      const orphanUids = new Set<number>();
      for (let n = 0; n < uidCount; n++) if (!live.has(n)) orphanUids.add(uidBase + n);
      if (this.#root) processes += await killAll(() => processesOf(orphanUids));
      for (const c of this.controllers) {
        for (const name of await fs.readdir(path.join(CGROUP_ROOT, c, CGROUP_PARENT)).catch(() => [])) {
          const uid = Number(name.slice(1));
          if (!name.startsWith('u') || !orphanUids.has(uid)) continue;
          const dir = path.join(CGROUP_ROOT, c, CGROUP_PARENT, name);
          processes += await killAll(() => cgroupProcs(dir));
          await fs.rmdir(dir).catch(() => undefined);
        }
      }
    });
    // Work folders without a slot (left by an older version): removed once their run has ended.
    for (const e of await fs.readdir(workDir, { withFileTypes: true })) {
      if (!e.isDirectory() || e.name.startsWith('.') || liveRuns.has(e.name)) continue;
      if ((await state(e.name).catch(() => 'unknown' as const)) !== 'ended') continue;
      await fs.rm(path.join(workDir, e.name), { recursive: true, force: true });
      folders++;
    }
    if (slots || processes || folders) logger.warn({ slots, processes, folders }, 'reaped what earlier run-service processes left behind');
    return { slots, processes, folders };
  }
}
