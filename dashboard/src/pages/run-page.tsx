/**
 * One run: its task, status, result and error, cost and tokens; the steps (browser-agent) or the
 * terminal transcript and tool uses (browsercode) arriving live over the event stream; the live
 * view while its browser runs, the recording once it stopped; output files; Stop; a follow-up in
 * the same session.
 */
import type { BrowserHandle, Event, Run, Session, Step } from '@agent-task-service/client';
import { TERMINAL_STATUSES } from '@agent-task-service/client';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ConfirmButton } from '../components/confirm-button.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { FileList } from '../components/file-list.tsx';
import { LiveView } from '../components/live-view.tsx';
import { Loading } from '../components/loading.tsx';
import { Markdown } from '../components/markdown.tsx';
import { RecordingPlayer } from '../components/recording.tsx';
import { RunTimeline } from '../components/run-timeline.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { TerminalView } from '../components/terminal.tsx';
import { ToolUses } from '../components/tool-uses.tsx';
import { useAction, useInterval, useLoad, useNow } from '../hooks.ts';
import { formatCost, formatDuration, formatTimestamp, formatTokens, runDurationMs, taskTitle } from '../lib/format.ts';
import { stepAt, stepOffsetSeconds } from '../lib/recording.ts';
import { resultView } from '../lib/result.ts';
import { href } from '../lib/router.ts';
import { hasTerminal, toolUses } from '../lib/transcript.ts';

const isEnded = (r: Run) => TERMINAL_STATUSES.includes(r.status);

function ResultPanel({ run }: { run: Run }) {
  const view = resultView(run.result);
  if (view.kind === 'empty' && !run.error) return null;
  return (
    <section class="card" aria-labelledby="result-h">
      <h2 id="result-h">{run.status === 'failed' ? 'Error' : 'Result'}</h2>
      {run.error && (
        <p class="run-error" role={run.status === 'failed' ? 'alert' : undefined}>
          {run.error}
        </p>
      )}
      {run.error && view.kind !== 'empty' && <h3 class="small muted">Partial result</h3>}
      {view.kind === 'json' && (
        <pre class="json" tabIndex={0}>
          <code>{view.text}</code>
        </pre>
      )}
      {view.kind === 'markdown' && <Markdown text={view.text} />}
      {view.kind === 'text' && (
        <pre class="json" tabIndex={0}>
          <code>{view.text}</code>
        </pre>
      )}
    </section>
  );
}

function FollowUp({ run, session }: { run: Run; session: Session | undefined }) {
  const client = useClient();
  const [task, setTask] = useState('');
  const create = useAction(async () => {
    const created = await client.runs.create({ agent: run.agent, task: task.trim(), sessionId: run.sessionId });
    window.location.hash = href({ page: 'run', agent: created.agent, id: created.id });
  });
  if (!session) return null;
  if (session.status === 'closed') {
    return (
      <p class="muted small">
        The session is closed{session.closedReason ? ` (${session.closedReason})` : ''}: a follow-up needs a new run.{' '}
        <a href={href({ page: 'new-run', agent: run.agent })}>Start one</a>
      </p>
    );
  }
  // browser-agent refuses a follow-up on a busy session; browsercode queues it after the current turn.
  const blocked = run.agent === 'browser-agent' && session.busy;
  return (
    <form
      class="follow-up"
      onSubmit={(e) => {
        e.preventDefault();
        if (task.trim()) void create.run();
      }}
    >
      <label for="follow-up">Follow-up in this session</label>
      <textarea id="follow-up" rows={3} value={task} onInput={(e) => setTask((e.currentTarget as HTMLTextAreaElement).value)} placeholder="What next? The agent continues where this run left off." />
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={create.busy || !task.trim() || blocked}>
          {create.busy ? 'Starting…' : 'Continue the session'}
        </button>
        {blocked && <span class="muted small">The session is busy until this run ends.</span>}
      </div>
      <ErrorNotice error={create.error} />
    </form>
  );
}

/** The browser side of a run: live while its browser runs, the recording after it stopped. */
function BrowserPanel({
  run,
  browser,
  onStopBrowser,
  stopping,
  videoRef,
  onTime,
}: {
  run: Run;
  browser: BrowserHandle;
  onStopBrowser: () => void;
  stopping: boolean;
  videoRef: { current: HTMLVideoElement | null };
  onTime: (s: number) => void;
}) {
  if (browser.status === 'active') {
    return (
      <section class="card" aria-labelledby="live-h">
        <h2 id="live-h">Live view</h2>
        <LiveView browserId={browser.id} title={`Live view of the browser of run ${run.id}`} />
        {isEnded(run) && (
          <div class="browser-kept">
            <p class="muted small">
              The run has ended; its browser stays open for a follow-up. The recording is ready once the browser stops
              {run.agent === 'browser-agent' ? ' (which closes the session)' : ''}.
            </p>
            <ConfirmButton label="Stop the browser" confirmLabel="Stop it now" onConfirm={onStopBrowser} busy={stopping} />
          </div>
        )}
      </section>
    );
  }
  return (
    <section class="card" aria-labelledby="rec-h">
      <h2 id="rec-h">Recording</h2>
      <RecordingPlayer browserId={browser.id} videoRef={videoRef} onTime={onTime} />
    </section>
  );
}

export default function RunPage({ agent, id }: { agent: string; id: string }) {
  const client = useClient();
  const opts = { agent: agent as Run['agent'] };
  const run = useLoad((signal) => client.runs.get(id, { ...opts, signal }), [id, agent]);
  const [steps, setSteps] = useState<Step[]>([]);
  const [stepsLoaded, setStepsLoaded] = useState(false);
  const [events, setEvents] = useState<Event[]>([]);
  const [streamError, setStreamError] = useState<unknown>(undefined);
  const [streamTick, setStreamTick] = useState(0);
  const [browser, setBrowser] = useState<BrowserHandle | undefined>(undefined);
  const [current, setCurrent] = useState<number | null>(null);
  const videoRef = useRef<HTMLVideoElement | null>(null);
  const r = run.data;
  const ended = r ? isEnded(r) : false;
  const now = useNow(1000, Boolean(r) && !ended);

  // Read once the run is known, and again when it ends (its output files are complete then).
  const files = useLoad((signal) => (r ? client.runs.files(id, { ...opts, signal }) : Promise.resolve(undefined)), [id, agent, r ? ended : null]);
  const session = useLoad((signal) => (r ? client.sessions.get(r.sessionId, { ...opts, signal }) : Promise.resolve(undefined)), [r?.sessionId, r?.status]);

  // Steps and events so far, then the event stream while the run goes on.
  const stepsRef = useRef(steps);
  stepsRef.current = steps;
  useEffect(() => {
    setSteps([]);
    setStepsLoaded(false);
    setEvents([]);
    setBrowser(undefined);
  }, [id]);
  useEffect(() => {
    if (!r) return undefined;
    const ctrl = new AbortController();
    const signal = ctrl.signal;
    const moreSteps = async () => {
      const after = stepsRef.current.at(-1)?.number ?? 0;
      const fresh = await client.runs.steps(id, { ...opts, after, signal }).toArray();
      if (fresh.length && !signal.aborted) setSteps((s) => [...s.filter((x) => x.number <= after), ...fresh]);
    };
    (async () => {
      setStreamError(undefined);
      const all = await client.runs.events(id, { ...opts, signal }).toArray();
      if (signal.aborted) return;
      setEvents(all);
      await moreSteps();
      if (!signal.aborted) setStepsLoaded(true);
      if (isEnded(r)) return;
      let after = all.at(-1)?.id ?? 0;
      for await (const e of client.runs.stream(id, { ...opts, after, signal })) {
        after = e.id;
        setEvents((list) => (list.some((x) => x.id === e.id) ? list : [...list, e]));
        if (e.type === 'step') await moreSteps();
        if (e.type === 'file.written') files.reload();
        // Its browser is known, or its status changed: the run record says more now.
        if (e.type === 'browser.ready' || e.type.startsWith('run.')) run.reload();
      }
      await moreSteps();
      run.reload();
    })().catch((err: unknown) => {
      if (!signal.aborted) setStreamError(err);
    });
    return () => ctrl.abort();
    // Restarted only for another run, or when the user asks after a broken stream.
  }, [id, Boolean(r), streamTick]);

  // Cost, tokens and status between events (the stream carries no totals).
  useInterval(() => run.reload(), 4000, Boolean(r) && !ended);

  const browserId = r?.browserId ?? null;
  useEffect(() => {
    if (!browserId) return undefined;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const b = await client.browsers.get(browserId);
        if (!live) return;
        setBrowser(b);
        // Followed while active: it may stop (a stop, a timeout, a reclaim) and its recording then comes.
        if (b.status === 'active') timer = setTimeout(load, 5000);
      } catch {
        if (live) timer = setTimeout(load, 5000);
      }
    };
    void load();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [browserId, r?.status]);

  // Presigned links expire (screenshots and files after 15 minutes): a page left open reads them again.
  const lastStepsRead = useRef(0);
  const freshScreenshots = async () => {
    if (Date.now() - lastStepsRead.current < 30_000) return;
    lastStepsRead.current = Date.now();
    const all = await client.runs.steps(id, opts).toArray().catch(() => null);
    if (all) setSteps(all);
  };
  useInterval(() => files.reload(), 10 * 60_000);

  const stop = useAction(async () => run.setData(await client.runs.stop(id, opts)));
  const stopBrowser = useAction(async () => {
    if (browserId) setBrowser(await client.browsers.stop(browserId));
    session.reload();
  });

  const uses = useMemo(() => toolUses(events), [events]);
  const showTerminal = hasTerminal(events);
  const offsetOf = (s: Step) => (browser && browser.status === 'stopped' ? stepOffsetSeconds(s.ts, browser.createdAt) : null);
  const play = (s: Step) => {
    const v = videoRef.current;
    if (!v || !browser) return;
    v.currentTime = stepOffsetSeconds(s.ts, browser.createdAt);
    setCurrent(s.number);
    void v.play().catch(() => undefined);
  };
  const onTime = (seconds: number) => browser && setCurrent(stepAt(steps, browser.createdAt, seconds));

  if (!r) {
    return (
      <section>
        <h1>Run</h1>
        {run.error ? <ErrorNotice error={run.error} onRetry={run.reload} /> : <Loading what="Loading the run" />}
      </section>
    );
  }
  const duration = runDurationMs(r, now);
  const stepsFirst = r.agent === 'browser-agent' || (!showTerminal && steps.length > 0);

  return (
    <section class="run-page">
      <p class="crumbs">
        <a href={href({ page: 'runs' })}>Runs</a> <span aria-hidden="true">/</span> <span class="mono">{r.id}</span>
      </p>
      <div class="page-head">
        <h1 class="run-title">{taskTitle(r.task) || r.id}</h1>
        <div class="page-actions">
          {!ended && <ConfirmButton label="Stop" confirmLabel="Stop this run" onConfirm={() => void stop.run()} busy={stop.busy} />}
          <a class="btn" href={href({ page: 'new-run', agent: r.agent })}>
            New run
          </a>
        </div>
      </div>
      <ErrorNotice error={stop.error ?? stopBrowser.error} />
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd>
            <StatusBadge status={r.status} />
          </dd>
        </div>
        <div>
          <dt>Agent</dt>
          <dd>{r.agent}</dd>
        </div>
        <div>
          <dt>Model</dt>
          <dd class="mono">{r.model}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>
            <time dateTime={r.startedAt ?? r.createdAt}>{formatTimestamp(r.startedAt ?? r.createdAt)}</time>
          </dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd>{duration === null ? 'not started' : formatDuration(duration)}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{formatCost(r.totalCostUsd)}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd>
            {formatTokens(r.totalInputTokens)} in · {formatTokens(r.totalOutputTokens)} out
          </dd>
        </div>
        <div>
          <dt>Session</dt>
          <dd>
            <a class="mono" href={href({ page: 'runs', session: r.sessionId })} title="Runs of this session">
              {r.sessionId}
            </a>
          </dd>
        </div>
        {r.workspaceId && (
          <div>
            <dt>Workspace</dt>
            <dd>
              <a class="mono" href={href({ page: 'workspace', id: r.workspaceId })}>
                {r.workspaceId}
              </a>
            </dd>
          </div>
        )}
      </dl>
      {r.task.trim() !== taskTitle(r.task) && (
        <details class="task-full">
          <summary>Full task</summary>
          <pre class="pre-wrap">{r.task}</pre>
        </details>
      )}
      {r.missingFileIds.length > 0 && (
        <p class="notice notice-warn">
          These attached files were not found and are not on the run's disk: <span class="mono">{r.missingFileIds.join(', ')}</span>
        </p>
      )}
      <ResultPanel run={r} />
      {streamError !== undefined && <ErrorNotice error={streamError} onRetry={() => setStreamTick((t) => t + 1)} />}
      <div class={`run-grid ${browser ? '' : 'run-grid-single'}`}>
        <div class="run-main">
          {showTerminal && (
            <section class="card" aria-labelledby="term-h">
              <h2 id="term-h">Terminal</h2>
              <TerminalView events={events} />
            </section>
          )}
          {(stepsFirst || steps.length > 0) && (
            <section class="card" aria-labelledby="steps-h">
              <h2 id="steps-h">
                Steps <span class="count">{steps.length}</span>
              </h2>
              {!stepsLoaded ? (
                <Loading what="Loading the steps" />
              ) : steps.length === 0 ? (
                <p class="muted">{ended ? 'This run took no browser steps.' : 'Waiting for the first step…'}</p>
              ) : (
                <RunTimeline steps={steps} current={current} offsetOf={offsetOf} onPlay={browser?.status === 'stopped' ? play : undefined} onImageError={() => void freshScreenshots()} live={!ended} />
              )}
            </section>
          )}
          {r.agent === 'browsercode' && (
            <section class="card" aria-labelledby="tools-h">
              <h2 id="tools-h">
                Tool uses <span class="count">{uses.length}</span>
              </h2>
              {uses.length ? <ToolUses uses={uses} /> : <p class="muted">{ended ? 'No tools were used.' : 'Waiting for the first tool use…'}</p>}
            </section>
          )}
        </div>
        <aside class="run-side" aria-label="Browser and files">
          {browser && <BrowserPanel run={r} browser={browser} onStopBrowser={() => void stopBrowser.run()} stopping={stopBrowser.busy} videoRef={videoRef} onTime={onTime} />}
          <section class="card" aria-labelledby="files-h">
            <h2 id="files-h">Files</h2>
            {files.error ? <ErrorNotice error={files.error} onRetry={files.reload} /> : files.data ? <FileList files={files.data} label="Files of this run" empty="No input or output files." /> : <Loading />}
          </section>
          <section class="card" aria-labelledby="follow-h">
            <h2 id="follow-h">Continue</h2>
            <FollowUp run={r} session={session.data} />
          </section>
        </aside>
      </div>
    </section>
  );
}
