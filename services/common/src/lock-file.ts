/**
 * A pid lock file. PGlite lets two processes open one data directory and corrupt it, so the
 * owner holds `<dir>/.lock`; a lock whose pid is gone is stale and taken over.
 */
import fs from 'node:fs';

/** Raised when another live process holds the lock. */
export class LockHeldError extends Error {
  readonly pid: number;
  constructor(file: string, pid: number) {
    super(`${file} is held by running process ${pid}; stop it first (or point DATABASE_URL at Postgres)`);
    this.name = this.constructor.name;
    this.pid = pid;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A held lock; `release` is idempotent and only removes the file if it is still ours. */
export interface LockFile {
  readonly path: string;
  release(): void;
}

/** Takes the lock at `file` for this process, or throws LockHeldError. */
export function acquireLock(file: string): LockFile {
  // Each retry follows a holder that let go (or a stale lock moved aside): bounded, but not by a few quick releases.
  for (let attempt = 0; attempt < 1000; attempt++) {
    try {
      // The pid is written first and the lock made by a hard link, which fails when the file exists:
      // a lock file is never seen empty (an empty one read between create and write looked stale,
      // and two processes both took it).
      const own = `${file}.${process.pid}`;
      fs.writeFileSync(own, String(process.pid), { mode: 0o600 });
      try {
        fs.linkSync(own, file);
      } finally {
        fs.rmSync(own, { force: true });
      }
      let released = false;
      return {
        path: file,
        release() {
          if (released) return;
          released = true;
          try {
            if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.unlinkSync(file);
          } catch {
            /* already gone */
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = NaN;
      try {
        pid = Number(fs.readFileSync(file, 'utf8').trim());
      } catch {
        continue; // removed between open and read: try again
      }
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) throw new LockHeldError(file, pid);
      // Stale (owner died) or unreadable: move it aside atomically, then retry the exclusive create.
      try {
        fs.renameSync(file, `${file}.stale-${process.pid}`);
        fs.rmSync(`${file}.stale-${process.pid}`, { force: true });
      } catch {
        /* someone else took it over first */
      }
    }
  }
  throw new Error(`could not acquire ${file}`);
}

/**
 * Takes the lock at `file`, waiting while another live process holds it (checking every
 * `intervalMs`); throws LockHeldError once `timeoutMs` passed.
 */
export async function waitForLock(file: string, timeoutMs: number, intervalMs: number): Promise<LockFile> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return acquireLock(file);
    } catch (err) {
      if (!(err instanceof LockHeldError) || performance.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
