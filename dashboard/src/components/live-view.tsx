/**
 * A browser's live view embedded in the page. It starts view-only (watching cannot disturb the
 * agent); "Take control" swaps in an interactive link so mouse and keyboard reach the browser.
 * The links are minted for this page and expire; the theme follows the system's.
 */
import type { LiveViewLink } from '@agent-task-service/client';
import { useEffect, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { usePrefersDark } from '../hooks.ts';
import { ErrorNotice } from './error-notice.tsx';
import { Loading } from './loading.tsx';

export function LiveView({ browserId, title }: { browserId: string; title: string }) {
  const client = useClient();
  const dark = usePrefersDark();
  const [mode, setMode] = useState<'view' | 'interactive'>('view');
  const [link, setLink] = useState<LiveViewLink | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let live = true;
    setLink(null);
    setError(undefined);
    client.browsers.liveViewLink(browserId, { mode, expiresInSeconds: 3600 }).then(
      (l) => live && setLink(l),
      (err: unknown) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [browserId, mode]);
  const src = link ? `${link.url}${link.url.includes('?') ? '&' : '?'}theme=${dark ? 'dark' : 'light'}` : null;
  return (
    <div class="live">
      <div class="live-bar">
        <span class="live-dot" aria-hidden="true" />
        <span>{mode === 'view' ? 'Watching live' : 'You are in control'}</span>
        <span class="spacer" />
        {mode === 'view' ? (
          <button type="button" class="btn btn-small" onClick={() => setMode('interactive')}>
            Take control
          </button>
        ) : (
          <button type="button" class="btn btn-small" onClick={() => setMode('view')}>
            Stop controlling
          </button>
        )}
        {src && (
          <a class="btn btn-small" href={src} target="_blank" rel="noopener noreferrer">
            Open in a new tab
          </a>
        )}
      </div>
      <ErrorNotice error={error} />
      {!src && !error && <Loading what="Opening the live view" />}
      {src && <iframe class="live-frame" src={src} title={title} allow="clipboard-read; clipboard-write" referrerpolicy="no-referrer" />}
    </div>
  );
}
