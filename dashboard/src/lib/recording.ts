/**
 * Where a step is in its browser's recording (pure). A recording runs from the browser's start
 * in wall time (gaps are filled), so a step that started `t` after the browser is at `t`.
 */

/** Seconds into the recording where the step began (never negative). */
export function stepOffsetSeconds(stepTs: string, browserCreatedAt: string): number {
  return Math.max(0, (Date.parse(stepTs) - Date.parse(browserCreatedAt)) / 1000);
}

/** The number of the step showing at `seconds` into the recording (the last one begun), or null before the first. */
export function stepAt<T extends { number: number; ts: string }>(steps: T[], browserCreatedAt: string, seconds: number): number | null {
  let current: number | null = null;
  for (const s of steps) {
    if (stepOffsetSeconds(s.ts, browserCreatedAt) <= seconds + 0.05) current = s.number;
    else break;
  }
  return current;
}
