/**
 * The browsers' share of the CPU. Nice alone does not keep the services answering when many
 * browsers start at once: a nice 10 process weighs a tenth of a nice 0 one, but fifty launching
 * Chromiums are a few hundred processes. So every browser of a pool goes into one cgroup v1 `cpu`
 * group beside the pool's own processes, and while several browsers start at once the group as a
 * whole weighs `shares` (a nice 0 thread weighs 1024): while a service needs the CPU, all the
 * browsers together get a small part of it; while none does, the browsers get all of it. Outside
 * a burst the group weighs CALM_SHARES, so a lone warm refill or a busy page is not held back.
 *
 * The group is `<the pool's own cpu cgroup>/ats-browsers-<hash of the browsers' root>`, one per
 * pool (stacks side by side have their own). Where there is no writable v1 `cpu` hierarchy (not
 * root, cgroup v2, a Kubernetes pod without it) the pool says so at start and relies on nice.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../common/src/logger.js';

const PREFIX = 'ats-browsers-';
/** The group's weight while browsers are not starting in a burst: four service threads' worth. */
export const CALM_SHARES = 4096;

/** Where a process's cgroup of the v1 `cpu` controller is (from /proc/<pid>/cgroup), or undefined. */
export function cpuCgroupOf(pid: number | 'self' = 'self'): string | undefined {
  try {
    for (const line of fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
      const [, controllers, where] = line.split(':');
      if (controllers?.split(',').includes('cpu')) return where;
    }
  } catch {
    /* gone, or no /proc */
  }
  return undefined;
}

/** The mount point of the v1 hierarchy that holds the `cpu` controller, or undefined. */
function cpuMount(cgroupRoot: string): string | undefined {
  for (const name of ['cpu', 'cpu,cpuacct', 'cpuacct,cpu']) {
    const dir = path.join(cgroupRoot, name);
    if (fs.existsSync(path.join(dir, 'cpu.shares'))) return dir;
  }
  return undefined;
}

export class CpuGroup {
  /** The group's folder in the cgroup file system. */
  readonly dir: string;
  readonly shares: number;
  readonly #logger: Logger;

  private constructor(dir: string, shares: number, logger: Logger) {
    this.dir = dir;
    this.shares = shares;
    this.#logger = logger;
  }

  /**
   * The pool's group for the browsers under `rootDir`, made (or found, after a restart) with
   * `shares`; undefined, said in the log, where this host or process cannot have one.
   */
  static open(o: { rootDir: string; shares: number; logger: Logger; cgroupRoot?: string }): CpuGroup | undefined {
    const nice = 'browsers keep only their nice';
    if (o.shares <= 0) {
      o.logger.info(`browsers' CPU share: off (POOL_BROWSER_CPU_SHARES=0); ${nice}`);
      return undefined;
    }
    if (process.getuid?.() !== 0) {
      o.logger.info(`browsers' CPU share: not root, so no cgroup; ${nice}`);
      return undefined;
    }
    const mount = cpuMount(o.cgroupRoot ?? '/sys/fs/cgroup');
    const own = cpuCgroupOf();
    if (!mount || own === undefined) {
      o.logger.warn(`browsers' CPU share: no cgroup v1 cpu hierarchy here; ${nice}`);
      return undefined;
    }
    const parent = path.join(mount, own);
    const dir = path.join(parent, `${PREFIX}${createHash('sha256').update(path.resolve(o.rootDir)).digest('hex').slice(0, 12)}`);
    const group = new CpuGroup(dir, o.shares, o.logger);
    try {
      group.#make();
    } catch (err) {
      o.logger.warn({ err: (err as Error).message }, `browsers' CPU share: the cgroup could not be made; ${nice}`);
      return undefined;
    }
    removeEmptySiblings(parent, dir);
    o.logger.info({ cgroup: dir, shares: o.shares, calmShares: CALM_SHARES }, "browsers' CPU share: every browser in one cgroup, weighing `shares` against each service thread's 1024 while several start at once");
    return group;
  }

  #bursting = false;

  /** Writes the weight the group should have now: `shares` during a burst of launches, CALM_SHARES otherwise. */
  #weigh(): void {
    fs.writeFileSync(path.join(this.dir, 'cpu.shares'), String(this.#bursting ? this.shares : CALM_SHARES));
  }

  #make(): void {
    fs.mkdirSync(this.dir, { recursive: true });
    this.#weigh();
  }

  /**
   * Says whether browsers are starting several at once. Only then is the group held to `shares`:
   * launches are what starve the services (about a CPU-second each), while a single launch (a warm
   * refill) or browsers at work weigh CALM_SHARES, about as much as they would outside a group.
   */
  bursting(on: boolean): void {
    if (on === this.#bursting) return;
    this.#bursting = on;
    try {
      this.#weigh();
    } catch (err) {
      this.#logger.debug({ err: (err as Error).message }, "browsers' cgroup weight not changed");
    }
  }

  /**
   * Puts process `pid` (a supervisor not yet started its browser: what it starts inherits the
   * group) in the group. A group removed meanwhile (another pool found it empty) is made again.
   * Never throws: a browser outside the group still runs, nicer than the services.
   */
  add(pid: number): void {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        fs.writeFileSync(path.join(this.dir, 'cgroup.procs'), String(pid));
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ESRCH') return; // it exited: its launch says why
        try {
          this.#make();
        } catch {
          /* tried below, then given up */
        }
        if (attempt === 2) this.#logger.warn({ err: (err as Error).message, pid }, "a browser not put in the browsers' cgroup; it runs with its nice alone");
      }
    }
  }

  /** Whether process `pid` runs in this group. */
  holds(pid: number): boolean {
    const where = cpuCgroupOf(pid);
    return where !== undefined && this.dir.endsWith(where) && where.endsWith(path.basename(this.dir));
  }

  /** Removes the group when no browser is left in it (browsers left running for the next process keep it). */
  remove(): void {
    try {
      fs.rmdirSync(this.dir);
    } catch {
      /* still holds a browser (kept on exit), or already gone */
    }
  }
}

/** Groups of pools that exited without removing theirs (killed): an empty one is removed (rmdir refuses a group with a process in it). */
function removeEmptySiblings(parent: string, mine: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(parent).filter((n) => n.startsWith(PREFIX));
  } catch {
    return;
  }
  for (const n of names) {
    const dir = path.join(parent, n);
    if (dir === mine) continue;
    try {
      fs.rmdirSync(dir);
    } catch {
      /* in use */
    }
  }
}
