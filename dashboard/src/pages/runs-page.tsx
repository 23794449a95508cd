/**
 * The runs of both agents, newest first, filtered by agent, status and session, paged ("Show
 * more"), and kept current: the first page of each agent is read again every few seconds, and
 * shown runs that are still going are read one by one.
 */
import type { AgentName, Page, Run, RunStatusName } from '@agent-task-service/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { agentsOf, useClient } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { Loading } from '../components/loading.tsx';
import { RunTable } from '../components/run-table.tsx';
import { useInterval, useLoad, useNow } from '../hooks.ts';
import { applyFreshPage, mergeNewestFirst, replaceById, type LoadedList } from '../lib/run-feed.ts';
import { href } from '../lib/router.ts';

const STATUSES: RunStatusName[] = ['queued', 'running', 'completed', 'failed', 'stopped'];
const PAGE_SIZE = 25;
const REFRESH_MS = 3000;

interface AgentFeed extends LoadedList<Run> {
  agent: AgentName;
  /** The last page loaded (where "Show more" goes on). */
  last: Page<Run> | null;
}

const isActive = (r: Run) => r.status === 'queued' || r.status === 'running';

export function RunsPage({ agent, status, session }: { agent?: string; status?: string; session?: string }) {
  const client = useClient();
  const agents = useLoad(() => agentsOf(client), [client]);
  const [feeds, setFeeds] = useState<AgentFeed[] | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [more, setMore] = useState(false);
  const now = useNow(1000);
  const filterKey = `${agent ?? ''}|${status ?? ''}|${session ?? ''}`;
  const feedsRef = useRef(feeds);
  feedsRef.current = feeds;

  const names: AgentName[] | undefined = agents.data?.map((a) => a.name).filter((n) => !agent || n === agent);
  const query = (a: AgentName, signal?: AbortSignal) =>
    client.runs.list({ agent: a, limit: PAGE_SIZE, ...(status ? { status: status as RunStatusName } : {}), ...(session ? { sessionId: session } : {}), signal });

  useEffect(() => {
    if (!names) return undefined;
    const ctrl = new AbortController();
    setFeeds(null);
    setError(undefined);
    Promise.all(names.map(async (a) => ({ agent: a, page: await query(a, ctrl.signal).firstPage() }))).then(
      (pages) => !ctrl.signal.aborted && setFeeds(pages.map(({ agent: a, page }) => ({ agent: a, items: page.items, hasMore: page.hasNextPage(), last: page }))),
      (err: unknown) => !ctrl.signal.aborted && setError(err),
    );
    return () => ctrl.abort();
  }, [filterKey, names?.join(',')]);

  // Live: fresh first pages, and the shown runs that are still going (they may be past the first page).
  const refreshing = useRef(false);
  useInterval(
    async () => {
      const current = feedsRef.current;
      // One refresh at a time: a slow one is not overtaken by the next tick.
      if (!current || refreshing.current) return;
      refreshing.current = true;
      try {
        const fresh = await Promise.all(current.map((f) => query(f.agent).firstPage()));
        let next = current.map((f, i) => ({ ...f, ...applyFreshPage(f, { items: fresh[i]!.items, hasMore: fresh[i]!.hasNextPage() }) }));
        const freshIds = new Set(fresh.flatMap((p) => p.items.map((r) => r.id)));
        const stale = next.flatMap((f) => f.items).filter((r) => isActive(r) && !freshIds.has(r.id)).slice(0, 10);
        for (const r of await Promise.all(stale.map((r) => client.runs.get(r.id, { agent: r.agent })))) {
          next = next.map((f) => ({ ...f, items: replaceById(f.items, r) }));
        }
        if (feedsRef.current === current) setFeeds(next);
        setError(undefined);
      } catch (err) {
        setError(err);
      } finally {
        refreshing.current = false;
      }
    },
    REFRESH_MS,
    feeds !== null,
  );

  const merged = feeds ? mergeNewestFirst(feeds) : null;
  const showMore = async () => {
    if (!feeds || merged?.next === null || merged?.next === undefined) return;
    const i = merged.next;
    const f = feeds[i]!;
    setMore(true);
    try {
      const page = await f.last!.nextPage();
      if (page) {
        setFeeds(feeds.map((x, j) => (j === i ? { ...x, items: [...x.items, ...page.items], hasMore: page.hasNextPage(), last: page } : x)));
      }
    } catch (err) {
      setError(err);
    } finally {
      setMore(false);
    }
  };

  const go = (change: { agent?: string; status?: string; session?: string }) => {
    window.location.hash = href({ page: 'runs', agent, status, session, ...change });
  };
  const filtered = Boolean(agent || status || session);

  return (
    <section>
      <div class="page-head">
        <h1>Runs</h1>
        <a class="btn btn-primary" href={href({ page: 'new-run' })}>
          New run
        </a>
      </div>
      <form
        class="filters"
        aria-label="Filter runs"
        onSubmit={(e) => {
          e.preventDefault();
          const v = (new FormData(e.currentTarget as HTMLFormElement).get('session') as string | null)?.trim();
          go({ session: v || undefined });
        }}
      >
        <label>
          Agent
          <select value={agent ?? ''} onChange={(e) => go({ agent: (e.currentTarget as HTMLSelectElement).value || undefined })}>
            <option value="">All agents</option>
            {agents.data?.map((a) => (
              <option key={a.name} value={a.name}>
                {a.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={status ?? ''} onChange={(e) => go({ status: (e.currentTarget as HTMLSelectElement).value || undefined })}>
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Session
          <input name="session" key={session ?? ''} defaultValue={session ?? ''} placeholder="ses_…" spellcheck={false} />
        </label>
        <button type="submit" class="btn">
          Apply
        </button>
        {filtered && (
          <a class="btn btn-link" href={href({ page: 'runs' })}>
            Clear filters
          </a>
        )}
      </form>
      <ErrorNotice error={agents.error ?? error} onRetry={agents.error ? agents.reload : undefined} />
      {!merged && !error && !agents.error && <Loading what="Loading runs" />}
      {merged && merged.items.length === 0 && (
        <div class="empty">
          <p>{filtered ? 'No run matches these filters.' : 'No runs yet.'}</p>
          <a class="btn btn-primary" href={href({ page: 'new-run', session })}>
            Start a run
          </a>
        </div>
      )}
      {merged && merged.items.length > 0 && (
        <>
          <RunTable runs={merged.items} now={now} caption="Runs, newest first" />
          <p class="table-foot" aria-live="polite">
            <span class="muted">
              {merged.items.length} run{merged.items.length === 1 ? '' : 's'} shown · updating live
            </span>
            {merged.next !== null && (
              <button type="button" class="btn" onClick={showMore} disabled={more}>
                {more ? 'Loading…' : 'Show more'}
              </button>
            )}
          </p>
        </>
      )}
    </section>
  );
}
