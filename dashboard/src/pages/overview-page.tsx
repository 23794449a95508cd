/**
 * The overview of a chosen range of days: runs per day by outcome, browser-minutes per day, the
 * success rate, and cost and tokens per model. The figures are computed here from the runs and
 * browsers the API lists (newest first, read back to the start of the range).
 */
import type { AgentTaskService, BrowserHandle, Run } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { agentsOf, useClient } from '../api.ts';
import { BarChart } from '../components/chart.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { Loading } from '../components/loading.tsx';
import { useLoad } from '../hooks.ts';
import { browserMinutesPerDay, inRange, lastDays, runsPerDay, successRate, totals, totalsByModel, type DayRange } from '../lib/aggregate.ts';
import { formatCost, formatDuration, formatPercent, formatTokens } from '../lib/format.ts';
import { href } from '../lib/router.ts';

const RANGES = [7, 14, 30, 90];
/** Past this many runs (or browsers) per list, the figures cover only the newest ones, and say so. */
const MAX_ITEMS = 5000;
/** Browsers live at most a few hours: one created this long before the range cannot reach into it. */
const BROWSER_LOOKBACK_MS = 24 * 3600_000;

interface Facts {
  range: DayRange;
  runs: Run[];
  browsers: BrowserHandle[];
  truncated: boolean;
}

async function readBack<T extends { createdAt: string }>(pages: AsyncIterable<T>, since: number): Promise<{ items: T[]; truncated: boolean }> {
  const items: T[] = [];
  for await (const item of pages) {
    if (Date.parse(item.createdAt) < since) return { items, truncated: false };
    items.push(item);
    if (items.length >= MAX_ITEMS) return { items, truncated: true };
  }
  return { items, truncated: false };
}

async function loadFacts(client: AgentTaskService, days: number, signal: AbortSignal): Promise<Facts> {
  const range = lastDays(days);
  const agents = await agentsOf(client);
  const [runLists, browsers] = await Promise.all([
    Promise.all(agents.map((a) => readBack(client.runs.list({ agent: a.name, limit: 200, signal }), range.from))),
    readBack(client.browsers.list({ limit: 200, signal }), range.from - BROWSER_LOOKBACK_MS),
  ]);
  return {
    range,
    runs: runLists.flatMap((l) => l.items).filter((r) => inRange(r.createdAt, range)),
    browsers: browsers.items,
    truncated: browsers.truncated || runLists.some((l) => l.truncated),
  };
}

function Stat({ label, value, hint }: { label: string; value: string; hint?: string }) {
  return (
    <div class="stat">
      <dt>{label}</dt>
      <dd>
        <span class="stat-value">{value}</span>
        {hint && <span class="muted small">{hint}</span>}
      </dd>
    </div>
  );
}

export default function OverviewPage() {
  const client = useClient();
  const [days, setDays] = useState(14);
  const facts = useLoad((signal) => loadFacts(client, days, signal), [client, days]);
  const f = facts.data;
  const perDay = f ? runsPerDay(f.runs, f.range) : null;
  const minutes = f ? browserMinutesPerDay(f.browsers, f.range) : null;
  const byModel = f ? totalsByModel(f.runs) : [];
  const sum = f ? totals(f.runs) : null;
  const rate = f ? successRate(f.runs) : null;
  const browserMs = minutes ? minutes.reduce((a, b) => a + b, 0) * 60_000 : 0;
  const ended = f ? f.runs.filter((r) => r.status === 'completed' || r.status === 'failed').length : 0;
  return (
    <section>
      <div class="page-head">
        <h1>Overview</h1>
        <div class="page-actions">
          <label class="inline-label">
            Range
            <select value={days} onChange={(e) => setDays(Number((e.currentTarget as HTMLSelectElement).value))}>
              {RANGES.map((d) => (
                <option key={d} value={d}>
                  Last {d} days
                </option>
              ))}
            </select>
          </label>
        </div>
      </div>
      <ErrorNotice error={facts.error} onRetry={facts.reload} />
      {!f && !facts.error && <Loading what="Reading runs and browsers" />}
      {f && perDay && minutes && sum && (
        <>
          {f.truncated && <p class="notice notice-warn">More than {MAX_ITEMS} runs or browsers in this range: the figures cover the newest {MAX_ITEMS} of each list.</p>}
          <dl class="stats">
            <Stat label="Runs" value={String(sum.runs)} />
            <Stat label="Success rate" value={formatPercent(rate)} hint={`${ended} completed or failed`} />
            <Stat label="Cost" value={formatCost(sum.costUsd)} />
            <Stat label="Tokens" value={formatTokens(sum.inputTokens + sum.outputTokens)} hint={`${formatTokens(sum.inputTokens)} in · ${formatTokens(sum.outputTokens)} out`} />
            <Stat label="Browser time" value={browserMs ? formatDuration(browserMs) : '0 min'} />
          </dl>
          {sum.runs === 0 && (
            <p class="empty">
              No runs in the last {days} days. <a href={href({ page: 'new-run' })}>Start one</a>.
            </p>
          )}
          <div class="charts">
            <section class="card">
              <BarChart
                title="Runs per day"
                kind="days"
                x={perDay.days}
                stacked
                integer
                format={(v) => String(Math.round(v))}
                series={[
                  { label: 'Completed', values: perDay.completed, color: '--c-completed' },
                  { label: 'Failed', values: perDay.failed, color: '--c-failed' },
                  { label: 'Stopped', values: perDay.stopped, color: '--c-stopped' },
                  { label: 'Queued or running', values: perDay.active, color: '--c-running' },
                ]}
              />
            </section>
            <section class="card">
              <BarChart title="Browser-minutes per day" kind="days" x={perDay.days} format={(v) => (v >= 10 ? String(Math.round(v)) : v >= 1 ? v.toFixed(1) : v.toFixed(2))} series={[{ label: 'Minutes', values: minutes, color: '--c-browser' }]} />
            </section>
            {byModel.length > 0 && (
              <>
                <section class="card">
                  <BarChart title="Cost per model (USD)" kind="categories" x={byModel.map((m) => m.model)} format={(v) => formatCost(v)} series={[{ label: 'Cost', values: byModel.map((m) => m.costUsd), color: '--c-cost' }]} />
                </section>
                <section class="card">
                  <BarChart
                    title="Tokens per model"
                    kind="categories"
                    integer
                    x={byModel.map((m) => m.model)}
                    format={(v) => formatTokens(v)}
                    series={[
                      { label: 'Input', values: byModel.map((m) => m.inputTokens), color: '--c-input' },
                      { label: 'Output', values: byModel.map((m) => m.outputTokens), color: '--c-output' },
                    ]}
                  />
                </section>
              </>
            )}
          </div>
          {byModel.length > 0 && (
            <table class="table">
              <caption>By model</caption>
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col" class="num">
                    Runs
                  </th>
                  <th scope="col" class="num">
                    Cost
                  </th>
                  <th scope="col" class="num">
                    Input tokens
                  </th>
                  <th scope="col" class="num">
                    Output tokens
                  </th>
                </tr>
              </thead>
              <tbody>
                {byModel.map((m) => (
                  <tr key={m.model}>
                    <td data-label="Model" class="mono">
                      {m.model}
                    </td>
                    <td data-label="Runs" class="num">
                      {m.runs}
                    </td>
                    <td data-label="Cost" class="num">
                      {formatCost(m.costUsd)}
                    </td>
                    <td data-label="Input tokens" class="num">
                      {formatTokens(m.inputTokens)}
                    </td>
                    <td data-label="Output tokens" class="num">
                      {formatTokens(m.outputTokens)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
