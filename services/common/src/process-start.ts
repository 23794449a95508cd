/**
 * When a process started (clock ticks since boot, field 22 of /proc/<pid>/stat): with its pid it
 * names one process for good, so a record of "pid N holds this" is not fooled by a reused pid.
 */
import { readFileSync } from 'node:fs';

/** The start time of `pid`, or undefined when no such process runs (or there is no /proc). */
export function processStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}
