/**
 * Bar charts drawn with uPlot: days on a time axis (stacked series allowed) or named categories.
 * Colours come from the page's theme; each chart also has its numbers as a table (for screen
 * readers and for reading exact values).
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot, { type AlignedData, type Options } from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { usePrefersDark } from '../hooks.ts';

export interface BarSeries {
  label: string;
  values: number[];
  /** A CSS variable holding the colour, e.g. `--c-completed`. */
  color: string;
}

export interface BarChartProps {
  title: string;
  /** Day names (`YYYY-MM-DD`, on a time axis) or category names. */
  x: string[];
  kind: 'days' | 'categories';
  series: BarSeries[];
  /** Stack the series instead of placing them side by side (side by side: at most two). */
  stacked?: boolean;
  format: (v: number) => string;
  /** Counts: the value axis has whole-number ticks only. */
  integer?: boolean;
  height?: number;
}

const INTEGER_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

function dayStart(day: string): number {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(y!, m! - 1, d!).getTime() / 1000;
}

export function BarChart({ title, x, kind, series, stacked = false, format, integer = false, height = 220 }: BarChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const dark = usePrefersDark();
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const xs = kind === 'days' ? x.map(dayStart) : x.map((_, i) => i);
    // Stacked: each series is drawn at the sum of itself and those below it, the tallest first.
    const drawn = stacked ? series.map((_, i) => xs.map((__, j) => series.slice(0, i + 1).reduce((a, s) => a + (s.values[j] ?? 0), 0))) : series.map((s) => s.values);
    const order = stacked ? series.map((_, i) => series.length - 1 - i) : series.map((_, i) => i);
    const n = series.length;
    const axis = { stroke: cssVar('--muted'), grid: { stroke: cssVar('--grid'), width: 1 }, ticks: { stroke: cssVar('--grid'), width: 1 }, font: '12px system-ui, sans-serif' };
    const opts: Options = {
      width: el.clientWidth || 600,
      height,
      // The legend names the colours; exact numbers are in the table under the chart.
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: kind === 'days' ? { time: true, range: (_u, min, max) => [min - 43200, max + 43200] } : { time: false, range: (_u, min, max) => [min - 0.6, max + 0.6] }, y: { range: (_u, _min, max) => [0, max > 0 ? (integer ? Math.max(Math.ceil(max * 1.1), 1) : max * 1.1) : 1] } },
      axes: [
        kind === 'days'
          ? { ...axis, values: (_u, splits) => splits.map((s) => { const d = new Date(s * 1000); return `${d.getDate()}/${d.getMonth() + 1}`; }) }
          : { ...axis, splits: () => xs, values: (_u, splits) => splits.map((s) => x[Math.round(s)] ?? '') },
        { ...axis, size: 56, ...(integer ? { incrs: INTEGER_STEPS } : {}), values: (_u, splits) => splits.map((v) => format(v)) },
      ],
      series: [
        { label: kind === 'days' ? 'Day' : 'Model', value: (_u, v) => (v === null ? '—' : kind === 'days' ? x[xs.indexOf(v)] ?? '' : x[Math.round(v)] ?? '') },
        ...order.map((i) => {
          const s = series[i]!;
          const color = cssVar(s.color);
          return {
            label: s.label,
            fill: color,
            stroke: color,
            width: 0,
            // The legend shows the series' own number, not the stacked sum it is drawn at.
            value: (_u: uPlot, _v: number | null, _si: number, di: number | null) => (di === null ? '—' : format(s.values[di] ?? 0)),
            // Two series side by side: one bar left of its x, the other right of it.
            paths: uPlot.paths.bars!(stacked || n === 1 ? { size: [0.7, 48] } : { size: [0.35, 24], align: i === 0 ? -1 : 1 }),
            points: { show: false },
          };
        }),
      ],
    };
    const data = [xs, ...order.map((i) => drawn[i]!)] as AlignedData;
    const plot = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [JSON.stringify({ x, series, stacked, kind, integer }), dark, height]);

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" role="img" aria-label={`${title}: chart; the numbers are in the table below`} />
      <details class="chart-data">
        <summary>Numbers</summary>
        <table class="table table-compact">
          <caption class="visually-hidden">{title}</caption>
          <thead>
            <tr>
              <th scope="col">{kind === 'days' ? 'Day' : 'Model'}</th>
              {series.map((s) => (
                <th key={s.label} scope="col" class="num">
                  {s.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {x.map((name, j) => (
              <tr key={name}>
                <th scope="row">{name}</th>
                {series.map((s) => (
                  <td key={s.label} class="num">
                    {format(s.values[j] ?? 0)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
