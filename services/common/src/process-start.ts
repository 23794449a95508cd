/**
 * When a process started (clock ticks since boot, field 22 of /proc/<pid>/stat): with its pid it
 * names one process for good, so a record of "pid N holds this" is not fooled by a reused pid.
 */
import { readFileSync, readlinkSync } from 'node:fs';

/** The start time of `pid`, or undefined when no such process runs (or there is no /proc). */
export function processStartTime(pid: number): number | undefined {
  return procStat(pid)?.start;
}

function procStat(pid: number): { state: string; start: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, start: Number(fields[19]) };
  } catch {
    return undefined;
  }
}

/** This host's boot and PID namespace ("<boot id>:<namespace inode>"): pids are comparable only within one. Read once: neither changes while a process runs. */
let space: string | undefined | null = null;
function pidSpace(): string | undefined {
  if (space !== null) return space;
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const ns = /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
    space = boot && ns ? `${boot}:${ns}` : undefined;
  } catch {
    space = undefined;
  }
  return space;
}

/**
 * This process, named so that another process can tell later whether it still runs:
 * `linux:<boot id>:<pid namespace>:<pid>:<start time>`; undefined without /proc.
 */
export function processIdentity(pid = process.pid): string | undefined {
  const here = pidSpace();
  const start = processStartTime(pid);
  return here && start !== undefined ? `linux:${here}:${pid}:${start}` : undefined;
}

/**
 * Whether the process a `processIdentity()` names still runs, as seen from this one: `alive` or
 * `gone` when it ran in this process's PID namespace since this boot (a restart on the same host:
 * a crash, `make up`, a supervisor), `unknown` when it ran elsewhere (another host or container)
 * or the identity says nothing.
 */
export function processLiveness(identity: string | null | undefined): 'alive' | 'gone' | 'unknown' {
  const m = /^linux:([^:]+:\d+):(\d+):(\d+)$/.exec(identity ?? '');
  const here = pidSpace();
  if (!m || !here || m[1] !== here) return 'unknown';
  const stat = procStat(Number(m[2]));
  // A zombie (dead, not yet reaped by its parent) runs nothing.
  return stat && stat.state !== 'Z' && stat.start === Number(m[3]) ? 'alive' : 'gone';
}
