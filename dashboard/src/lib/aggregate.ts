/**
 * The Overview's figures, computed from the runs and browsers the API lists (pure): runs and
 * browser-minutes per local day, the success rate, and cost and tokens per model.
 */
import { localDay, startOfDay } from './format.ts';

/** The fields of a run the figures read. */
export interface RunFacts {
  status: string;
  model: string;
  createdAt: string;
  totalCostUsd: string;
  totalInputTokens: number;
  totalOutputTokens: number;
}

/** The fields of a browser the figures read. */
export interface BrowserFacts {
  createdAt: string;
  stoppedAt: string | null;
}

/** A span of whole local days ending today: `from` is the first day's midnight, `days` their names. */
export interface DayRange {
  from: number;
  /** The end of today (exclusive). */
  to: number;
  days: string[];
}

/** The last `count` local days, today included. */
export function lastDays(count: number, now = Date.now()): DayRange {
  const days: string[] = [];
  // Step by calendar days, not by 24 h: a day of a DST change is 23 or 25 hours long.
  const first = new Date(startOfDay(now));
  first.setDate(first.getDate() - (count - 1));
  const d = new Date(first);
  for (let i = 0; i < count; i++) {
    days.push(localDay(d.getTime()));
    d.setDate(d.getDate() + 1);
  }
  return { from: first.getTime(), to: d.getTime(), days };
}

/** Whether `iso` falls in the range. */
export function inRange(iso: string, range: DayRange): boolean {
  const t = Date.parse(iso);
  return t >= range.from && t < range.to;
}

export interface RunsPerDay {
  days: string[];
  completed: number[];
  failed: number[];
  stopped: number[];
  /** Queued or running. */
  active: number[];
}

/** Runs created on each day of the range, by how they ended. */
export function runsPerDay(runs: RunFacts[], range: DayRange): RunsPerDay {
  const index = new Map(range.days.map((d, i) => [d, i]));
  const zero = () => range.days.map(() => 0);
  const out: RunsPerDay = { days: range.days, completed: zero(), failed: zero(), stopped: zero(), active: zero() };
  for (const r of runs) {
    const i = index.get(localDay(Date.parse(r.createdAt)));
    if (i === undefined) continue;
    const row = r.status === 'completed' ? out.completed : r.status === 'failed' ? out.failed : r.status === 'stopped' ? out.stopped : out.active;
    row[i]! += 1;
  }
  return out;
}

/**
 * Minutes browsers were up on each day of the range; a browser's time is split at midnight, and
 * one still running counts until `now`.
 */
export function browserMinutesPerDay(browsers: BrowserFacts[], range: DayRange, now = Date.now()): number[] {
  const minutes = range.days.map(() => 0);
  // The day boundaries, as calendar days (DST-safe).
  const bounds: number[] = [];
  const d = new Date(range.from);
  for (let i = 0; i <= range.days.length; i++) {
    bounds.push(d.getTime());
    d.setDate(d.getDate() + 1);
  }
  for (const b of browsers) {
    const start = Date.parse(b.createdAt);
    const end = b.stoppedAt ? Date.parse(b.stoppedAt) : now;
    if (!(end > start)) continue;
    for (let i = 0; i < range.days.length; i++) {
      const overlap = Math.min(end, bounds[i + 1]!) - Math.max(start, bounds[i]!);
      if (overlap > 0) minutes[i]! += overlap / 60000;
    }
  }
  return minutes;
}

/** Completed runs of those that ended completed or failed (a run the user stopped is neither); null with none. */
export function successRate(runs: RunFacts[]): number | null {
  let completed = 0;
  let failed = 0;
  for (const r of runs) {
    if (r.status === 'completed') completed++;
    else if (r.status === 'failed') failed++;
  }
  return completed + failed ? completed / (completed + failed) : null;
}

export interface ModelTotals {
  model: string;
  runs: number;
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
}

/** Runs, cost and tokens per model, the most expensive first (then the most used). */
export function totalsByModel(runs: RunFacts[]): ModelTotals[] {
  const by = new Map<string, ModelTotals>();
  for (const r of runs) {
    const t = by.get(r.model) ?? { model: r.model, runs: 0, costUsd: 0, inputTokens: 0, outputTokens: 0 };
    t.runs++;
    t.costUsd += Number(r.totalCostUsd) || 0;
    t.inputTokens += r.totalInputTokens;
    t.outputTokens += r.totalOutputTokens;
    by.set(r.model, t);
  }
  return [...by.values()].sort((a, b) => b.costUsd - a.costUsd || b.runs - a.runs || a.model.localeCompare(b.model));
}

/** Sums of the whole range. */
export function totals(runs: RunFacts[]): { runs: number; costUsd: number; inputTokens: number; outputTokens: number } {
  return totalsByModel(runs).reduce((a, t) => ({ runs: a.runs + t.runs, costUsd: a.costUsd + t.costUsd, inputTokens: a.inputTokens + t.inputTokens, outputTokens: a.outputTokens + t.outputTokens }), {
    runs: 0,
    costUsd: 0,
    inputTokens: 0,
    outputTokens: 0,
  });
}
