/**
 * One browser: its CDP URL (with a copy button and puppeteer / Playwright snippets), the live
 * view while it runs, Stop, the recording once stopped, and the files it downloaded.
 */
import { useClient } from '../api.ts';
import { ConfirmButton } from '../components/confirm-button.tsx';
import { CopyButton } from '../components/copy-button.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { FileList } from '../components/file-list.tsx';
import { LiveView } from '../components/live-view.tsx';
import { Loading } from '../components/loading.tsx';
import { RecordingPlayer } from '../components/recording.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { useAction, useInterval, useLoad } from '../hooks.ts';
import { formatTimestamp } from '../lib/format.ts';
import { href } from '../lib/router.ts';

export function snippets(cdpUrl: string): { label: string; code: string }[] {
  const url = JSON.stringify(cdpUrl);
  return [
    {
      label: 'puppeteer',
      code: `import puppeteer from 'puppeteer-core';\n\nconst browser = await puppeteer.connect({ browserWSEndpoint: ${url} });\nconst [page] = await browser.pages();\nawait page.goto('https://example.com');\nconsole.log(await page.title());\nawait browser.disconnect();`,
    },
    {
      label: 'Playwright',
      code: `import { chromium } from 'playwright';\n\nconst browser = await chromium.connectOverCDP(${url});\nconst page = browser.contexts()[0].pages()[0];\nawait page.goto('https://example.com');\nconsole.log(await page.title());\nawait browser.close();`,
    },
  ];
}

export default function BrowserPage({ id }: { id: string }) {
  const client = useClient();
  const b = useLoad((signal) => client.browsers.get(id, { signal }), [id]);
  const downloads = useLoad((signal) => client.browsers.downloads(id, { signal }), [id, b.data?.status]);
  const active = b.data?.status === 'active';
  useInterval(() => (b.reload(), downloads.reload()), 5000, active);
  // Download links last 15 minutes: a page left open lists them again.
  useInterval(() => downloads.reload(), 10 * 60_000, !active);
  const stop = useAction(async () => b.setData(await client.browsers.stop(id)));
  const br = b.data;
  if (!br) {
    return (
      <section>
        <h1>Browser</h1>
        {b.error ? <ErrorNotice error={b.error} onRetry={b.reload} /> : <Loading what="Loading the browser" />}
      </section>
    );
  }
  return (
    <section class="browser-page">
      <p class="crumbs">
        <a href={href({ page: 'browsers' })}>Browsers</a> <span aria-hidden="true">/</span> <span class="mono">{br.id}</span>
      </p>
      <div class="page-head">
        <h1>
          Browser <span class="mono">{br.id}</span>
        </h1>
        <div class="page-actions">{active && <ConfirmButton label="Stop" confirmLabel="Stop this browser" onConfirm={() => void stop.run()} busy={stop.busy} />}</div>
      </div>
      <ErrorNotice error={stop.error} />
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd>
            <StatusBadge status={br.status} />
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{formatTimestamp(br.createdAt)}</dd>
        </div>
        <div>
          <dt>{br.status === 'stopped' ? 'Stopped' : 'Stops at the latest'}</dt>
          <dd>{formatTimestamp(br.status === 'stopped' ? br.stoppedAt : br.timeoutAt)}</dd>
        </div>
        <div>
          <dt>Screen</dt>
          <dd>
            {br.screenWidth} × {br.screenHeight}
          </dd>
        </div>
        <div>
          <dt>Profile</dt>
          <dd class="mono">{br.profileId ?? 'none'}</dd>
        </div>
        <div>
          <dt>Proxy</dt>
          <dd>{br.proxyCountryCode ?? 'none'}</dd>
        </div>
        {br.runId && (
          <div>
            <dt>Run</dt>
            <dd class="mono">{br.runId}</dd>
          </div>
        )}
      </dl>
      <div class="run-grid">
        <div class="run-main">
          {active && br.cdpUrl && (
            <section class="card" aria-labelledby="cdp-h">
              <h2 id="cdp-h">Connect over CDP</h2>
              <p class="muted small">The URL carries a token for this browser only: keep it private.</p>
              <div class="copy-row">
                <input class="mono" readOnly value={br.cdpUrl} aria-label="CDP URL" onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} />
                <CopyButton text={br.cdpUrl} label="Copy CDP URL" />
              </div>
              {snippets(br.cdpUrl).map((s) => (
                <figure key={s.label} class="code-block">
                  <figcaption>
                    <span>{s.label}</span>
                    <CopyButton text={s.code} label={`Copy the ${s.label} snippet`} />
                  </figcaption>
                  <pre tabIndex={0}>
                    <code>{s.code}</code>
                  </pre>
                </figure>
              ))}
            </section>
          )}
          <section class="card" aria-labelledby="dl-h">
            <h2 id="dl-h">Downloads</h2>
            {downloads.error ? <ErrorNotice error={downloads.error} onRetry={downloads.reload} /> : downloads.data ? <FileList files={downloads.data} label="Files this browser downloaded" empty={active ? 'Nothing downloaded yet.' : 'Nothing was downloaded.'} /> : <Loading />}
          </section>
        </div>
        <aside class="run-side" aria-label="Live view and recording">
          <section class="card" aria-labelledby="view-h">
            <h2 id="view-h">{active ? 'Live view' : 'Recording'}</h2>
            {active ? <LiveView browserId={br.id} title={`Live view of browser ${br.id}`} /> : <RecordingPlayer browserId={br.id} />}
          </section>
        </aside>
      </div>
    </section>
  );
}
