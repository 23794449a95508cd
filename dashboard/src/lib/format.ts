/** How numbers, times and sizes read on the dashboard (pure; the tests pin each form). */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A duration: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < SECOND) return `${Math.round(ms)} ms`;
  if (ms < 10 * SECOND) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`;
  if (ms < MINUTE) return `${Math.floor(ms / SECOND)} s`;
  if (ms < HOUR) {
    const m = Math.floor(ms / MINUTE);
    const s = Math.floor((ms % MINUTE) / SECOND);
    return s ? `${m} min ${s} s` : `${m} min`;
  }
  const h = Math.floor(ms / HOUR);
  const m = Math.floor((ms % HOUR) / MINUTE);
  return m ? `${h} h ${m} min` : `${h} h`;
}

/** How long a run took, or has taken so far; null before it started. */
export function runDurationMs(run: { startedAt: string | null; finishedAt: string | null }, now = Date.now()): number | null {
  if (!run.startedAt) return null;
  const end = run.finishedAt ? Date.parse(run.finishedAt) : now;
  return Math.max(0, end - Date.parse(run.startedAt));
}

/** A cost in US dollars from the API's decimal string: `$0`, `$0.0042`, `$1.23`. */
export function formatCost(usd: string | number): string {
  const n = typeof usd === 'number' ? usd : Number(usd);
  if (!Number.isFinite(n)) return '—';
  if (n === 0) return '$0';
  if (Math.abs(n) >= 1) return `$${n.toFixed(2)}`;
  // Small amounts keep two significant digits: a cheap run is not "$0.00".
  return `$${Number(n.toPrecision(2)).toString()}`;
}

/** A token count: `950`, `12.3k`, `4.5M`. */
export function formatTokens(n: number): string {
  if (!Number.isFinite(n)) return '—';
  if (Math.abs(n) < 1000) return String(Math.round(n));
  if (Math.abs(n) < 1e6) return `${trim1(n / 1e3)}k`;
  return `${trim1(n / 1e6)}M`;
}

function trim1(n: number): string {
  return n >= 100 ? String(Math.round(n)) : n.toFixed(1).replace(/\.0$/, '');
}

/** A byte size: `512 B`, `3.4 KB`, `12 MB`. */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${trim1(v)} ${units[i]}`;
}

/** A percentage of a ratio: `87%`, `99.5%`; `—` when there is nothing to divide. */
export function formatPercent(ratio: number | null): string {
  if (ratio === null || !Number.isFinite(ratio)) return '—';
  const p = ratio * 100;
  return `${p === 100 || p === 0 || p >= 10 ? Math.round(p) : p.toFixed(1).replace(/\.0$/, '')}%`;
}

/**
 * A moment relative to now for lists: `just now`, `5 min ago`, `3 h ago`, `yesterday 14:05`,
 * else the date (`12 Mar 14:05`, with the year when it is not this year's).
 */
export function formatWhen(iso: string | null, now = Date.now()): string {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '—';
  const ago = now - t;
  if (ago >= -MINUTE && ago < MINUTE) return 'just now';
  if (ago > 0 && ago < HOUR) return `${Math.floor(ago / MINUTE)} min ago`;
  if (ago > 0 && ago < 6 * HOUR) return `${Math.floor(ago / HOUR)} h ago`;
  const d = new Date(t);
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const today = startOfDay(now);
  if (t >= today) return `today ${time}`;
  if (t >= today - DAY) return `yesterday ${time}`;
  const n = new Date(now);
  const date = `${d.getDate()} ${MONTHS[d.getMonth()]}`;
  return d.getFullYear() === n.getFullYear() ? `${date} ${time}` : `${date} ${d.getFullYear()} ${time}`;
}

/** A full local timestamp for titles and detail pages: `2026-03-12 14:05:09`. */
export function formatTimestamp(iso: string | null): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return `${localDay(d.getTime())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function pad(n: number): string {
  return String(n).padStart(2, '0');
}

/** Midnight (local time) of the day holding `t`. */
export function startOfDay(t: number): number {
  const d = new Date(t);
  d.setHours(0, 0, 0, 0);
  return d.getTime();
}

/** The local calendar day of `t` as `YYYY-MM-DD`. */
export function localDay(t: number): string {
  const d = new Date(t);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** The first line of a task, cut to `max` characters, for titles and lists. */
export function taskTitle(task: string, max = 120): string {
  const line = task.trim().split('\n')[0] ?? '';
  return line.length > max ? `${line.slice(0, max - 1).trimEnd()}…` : line;
}
