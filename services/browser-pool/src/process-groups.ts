/**
 * Process groups through /proc (Linux): each Chromium runs as the leader of its own group, so
 * killing the group takes its zygotes, renderers and GPU process with it. Zombies (dead, not yet
 * reaped by whoever adopted them) count as gone.
 */
import fs from 'node:fs';

/** A process as /proc shows it. */
export interface ProcInfo {
  pid: number;
  pgid: number;
  state: string;
}

function stat(pid: number): ProcInfo | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses.
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { pid, state: rest[0]!, pgid: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

function pids(): number[] {
  try {
    return fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
  } catch {
    return [];
  }
}

/** The NUL-separated command line of a process, or '' when it is gone. */
function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Live (not zombie) processes whose command line contains `marker`. */
export function processesUsing(marker: string): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const pid of pids()) {
    if (pid === process.pid) continue;
    if (!cmdline(pid).includes(marker)) continue;
    const s = stat(pid);
    if (s && s.state !== 'Z') out.push(s);
  }
  return out;
}

/** Live (not zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  if (!Number.isInteger(pgid) || pgid <= 1) throw new Error(`not a process group id: ${pgid}`);
  const out: number[] = [];
  for (const pid of pids()) {
    const s = stat(pid);
    if (s && s.pgid === pgid && s.state !== 'Z') out.push(pid);
  }
  return out;
}

/** False once no process (not even a zombie) is left in the group: the cheap check before a /proc scan. */
function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Sends `signal` to every process of a group; a group already gone is fine. */
export function killGroup(pgid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (!Number.isInteger(pgid) || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    /* gone */
  }
}

/** Resolves true once no live process is left in the group, false after `timeoutMs`. */
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    if (!groupExists(pgid) || groupMembers(pgid).length === 0) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, delay));
  }
}
