/** Standalone and run browsers: the running and recent ones, and a form to create one (profile, proxy, size, time limit). */
import type { BrowserHandle, Profile } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { Loading } from '../components/loading.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { useAction, useInterval, useLoad } from '../hooks.ts';
import { formatTimestamp, formatWhen } from '../lib/format.ts';
import { href } from '../lib/router.ts';
import { SCREEN_SIZES } from './new-run-page.tsx';

function CreateBrowser({ profiles }: { profiles: Profile[] }) {
  const client = useClient();
  const [profileId, setProfileId] = useState('');
  const [proxy, setProxy] = useState('');
  const [size, setSize] = useState('');
  const [minutes, setMinutes] = useState('');
  const create = useAction(async () => {
    const [w, h] = size ? size.split('x').map(Number) : [];
    const b = await client.browsers.create({
      ...(profileId ? { profileId } : {}),
      ...(proxy.trim() ? { proxyCountryCode: proxy.trim().toLowerCase() } : {}),
      ...(w && h ? { screenWidth: w, screenHeight: h } : {}),
      ...(minutes ? { timeoutMinutes: Number(minutes) } : {}),
    });
    window.location.hash = href({ page: 'browser', id: b.id });
  });
  return (
    <form
      class="card form"
      aria-labelledby="create-browser-h"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-browser-h">Create a browser</h2>
      <p class="muted small">A browser of your own, driven over CDP (puppeteer, Playwright) and watched live. It stops at its time limit.</p>
      <div class="form-grid">
        <div>
          <label for="b-profile">Profile</label>
          <select id="b-profile" value={profileId} onChange={(e) => setProfileId((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">None (a clean browser)</option>
            {profiles.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="b-proxy">Proxy country</label>
          <input id="b-proxy" value={proxy} maxLength={2} placeholder="e.g. de" pattern="[A-Za-z]{2}" onInput={(e) => setProxy((e.currentTarget as HTMLInputElement).value)} spellcheck={false} />
        </div>
        <div>
          <label for="b-size">Screen size</label>
          <select id="b-size" value={size} onChange={(e) => setSize((e.currentTarget as HTMLSelectElement).value)}>
            {SCREEN_SIZES.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="b-minutes">Time limit (minutes)</label>
          <input id="b-minutes" type="number" min={1} max={240} value={minutes} placeholder="60" onInput={(e) => setMinutes((e.currentTarget as HTMLInputElement).value)} />
        </div>
      </div>
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={create.busy}>
          {create.busy ? 'Starting the browser…' : 'Create browser'}
        </button>
      </div>
      <ErrorNotice error={create.error} />
    </form>
  );
}

export default function BrowsersPage() {
  const client = useClient();
  const [status, setStatus] = useState<'' | 'active' | 'stopped'>('');
  const list = useLoad((signal) => client.browsers.list({ limit: 50, ...(status ? { status } : {}), signal }).firstPage(), [client, status]);
  const profiles = useLoad((signal) => client.profiles.list({ limit: 200, signal }).toArray(200), [client]);
  useInterval(() => list.reload(), 5000);
  const items: BrowserHandle[] = list.data?.items ?? [];
  return (
    <section>
      <div class="page-head">
        <h1>Browsers</h1>
      </div>
      <CreateBrowser profiles={profiles.data ?? []} />
      <div class="filters">
        <label>
          Show
          <select value={status} onChange={(e) => setStatus((e.currentTarget as HTMLSelectElement).value as typeof status)}>
            <option value="">Running and recent</option>
            <option value="active">Running</option>
            <option value="stopped">Stopped</option>
          </select>
        </label>
      </div>
      <ErrorNotice error={list.error} onRetry={list.reload} />
      {!list.data && !list.error && <Loading what="Loading browsers" />}
      {list.data && items.length === 0 && <p class="empty">No browsers{status ? ` ${status === 'active' ? 'running' : 'stopped'}` : ''}.</p>}
      {items.length > 0 && (
        <table class="table">
          <caption class="visually-hidden">Browsers, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Browser</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Ends</th>
              <th scope="col">Size</th>
              <th scope="col">Used by</th>
            </tr>
          </thead>
          <tbody>
            {items.map((b) => (
              <tr key={b.id} data-browser-id={b.id}>
                <td data-label="Browser">
                  <a class="mono" href={href({ page: 'browser', id: b.id })}>
                    {b.id}
                  </a>
                </td>
                <td data-label="Status">
                  <StatusBadge status={b.status} />
                </td>
                <td data-label="Created">
                  <time dateTime={b.createdAt} title={formatTimestamp(b.createdAt)}>
                    {formatWhen(b.createdAt)}
                  </time>
                </td>
                <td data-label="Ends">{b.status === 'stopped' ? `stopped ${formatWhen(b.stoppedAt)}` : b.timeoutAt ? `at ${formatTimestamp(b.timeoutAt).slice(11, 16)}` : '—'}</td>
                <td data-label="Size">
                  {b.screenWidth} × {b.screenHeight}
                </td>
                <td data-label="Used by">
                  {b.sessionId ? (
                    <a class="mono" href={href({ page: 'runs', session: b.sessionId })} title="The runs of its session">
                      {b.runId ?? b.sessionId}
                    </a>
                  ) : b.runId ? (
                    <span class="mono">{b.runId}</span>
                  ) : (
                    'you (CDP)'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
