/** Runs as a table (a list of cards on a phone): status, task, agent, model, started, duration, cost, tokens. */
import type { Run } from '@agent-task-service/client';
import { formatCost, formatDuration, formatTimestamp, formatTokens, formatWhen, runDurationMs, taskTitle } from '../lib/format.ts';
import { href } from '../lib/router.ts';
import { StatusBadge } from './status-badge.tsx';

export function RunTable({ runs, now, caption }: { runs: Run[]; now: number; caption: string }) {
  return (
    <table class="table runs-table">
      <caption class="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Status</th>
          <th scope="col">Task</th>
          <th scope="col">Agent</th>
          <th scope="col">Model</th>
          <th scope="col">Started</th>
          <th scope="col" class="num">
            Duration
          </th>
          <th scope="col" class="num">
            Cost
          </th>
          <th scope="col" class="num">
            Tokens
          </th>
        </tr>
      </thead>
      <tbody>
        {runs.map((r) => {
          const ms = runDurationMs(r, now);
          return (
            <tr key={r.id} data-run-id={r.id}>
              <td data-label="Status">
                <StatusBadge status={r.status} />
              </td>
              <td data-label="Task" class="task-cell">
                <a href={href({ page: 'run', agent: r.agent, id: r.id })}>{taskTitle(r.task, 90) || r.id}</a>
              </td>
              <td data-label="Agent">{r.agent}</td>
              <td data-label="Model" class="mono">
                {r.model}
              </td>
              <td data-label="Started">
                <time dateTime={r.startedAt ?? r.createdAt} title={formatTimestamp(r.startedAt ?? r.createdAt)}>
                  {r.startedAt ? formatWhen(r.startedAt, now) : `queued ${formatWhen(r.createdAt, now)}`}
                </time>
              </td>
              <td data-label="Duration" class="num">
                {ms === null ? '—' : formatDuration(ms)}
              </td>
              <td data-label="Cost" class="num">
                {formatCost(r.totalCostUsd)}
              </td>
              <td data-label="Tokens" class="num" title={`${r.totalInputTokens} in, ${r.totalOutputTokens} out`}>
                {formatTokens(r.totalInputTokens + r.totalOutputTokens)}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
