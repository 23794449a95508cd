/** The dashboard: sign-in with an API key, then the shell (navigation, sign out) around the page of the route. */
import type { AgentTaskService } from '@agent-task-service/client';
import { useEffect, useErrorBoundary, useMemo, useRef, useState } from 'preact/hooks';
import { ErrorNotice } from './components/error-notice.tsx';
import { clearKey, ClientContext, makeClient, SignOutContext, storedKey } from './api.ts';
import { useHashRoute } from './hooks.ts';
import { lazyPage } from './lazy.tsx';
import { href, type Route } from './lib/router.ts';
import { RunsPage } from './pages/runs-page.tsx';
import { SignInPage } from './pages/sign-in-page.tsx';

const RunPage = lazyPage(() => import('./pages/run-page.tsx'));
const NewRunPage = lazyPage(() => import('./pages/new-run-page.tsx'));
const BrowsersPage = lazyPage(() => import('./pages/browsers-page.tsx'));
const BrowserPage = lazyPage(() => import('./pages/browser-page.tsx'));
const ProfilesPage = lazyPage(() => import('./pages/profiles-page.tsx'));
const WorkspacesPage = lazyPage(() => import('./pages/workspaces-page.tsx'));
const WorkspacePage = lazyPage(() => import('./pages/workspace-page.tsx'));
const OverviewPage = lazyPage(() => import('./pages/overview-page.tsx'));

const NAV: { label: string; route: Route; pages: Route['page'][] }[] = [
  { label: 'Overview', route: { page: 'overview' }, pages: ['overview'] },
  { label: 'Runs', route: { page: 'runs' }, pages: ['runs', 'run'] },
  { label: 'New run', route: { page: 'new-run' }, pages: ['new-run'] },
  { label: 'Browsers', route: { page: 'browsers' }, pages: ['browsers', 'browser'] },
  { label: 'Profiles', route: { page: 'profiles' }, pages: ['profiles'] },
  { label: 'Workspaces', route: { page: 'workspaces' }, pages: ['workspaces', 'workspace'] },
];

function PageOf({ route }: { route: Route }) {
  switch (route.page) {
    case 'overview':
      return <OverviewPage />;
    case 'runs':
      return <RunsPage agent={route.agent} status={route.status} session={route.session} />;
    case 'new-run':
      return <NewRunPage agent={route.agent} session={route.session} workspace={route.workspace} />;
    case 'run':
      return <RunPage agent={route.agent} id={route.id} />;
    case 'browsers':
      return <BrowsersPage />;
    case 'browser':
      return <BrowserPage id={route.id} />;
    case 'profiles':
      return <ProfilesPage />;
    case 'workspaces':
      return <WorkspacesPage />;
    case 'workspace':
      return <WorkspacePage id={route.id} />;
    case 'not-found':
      return (
        <section>
          <h1>Page not found</h1>
          <p>
            Nothing lives at <code>{route.path}</code>. <a href={href({ page: 'runs' })}>See the runs</a>.
          </p>
        </section>
      );
  }
}

/** A page that threw while rendering shows what went wrong instead of going blank. */
function PageBoundary({ route }: { route: Route }) {
  const [error, reset] = useErrorBoundary();
  if (error) {
    return (
      <section>
        <h1>This page failed</h1>
        <ErrorNotice error={error} onRetry={reset} />
      </section>
    );
  }
  return <PageOf route={route} />;
}

function Shell({ route, onSignOut }: { route: Route; onSignOut: () => void }) {
  const [menuOpen, setMenuOpen] = useState(false);
  const mainRef = useRef<HTMLElement>(null);
  const first = useRef(true);
  useEffect(() => {
    setMenuOpen(false);
    // After a navigation, focus goes to the new page (its heading is read first), as a page load would.
    if (first.current) first.current = false;
    else mainRef.current?.focus();
    window.scrollTo(0, 0);
  }, [href(route)]);
  return (
    <>
      <a class="skip-link" href="#main" onClick={(e) => (e.preventDefault(), mainRef.current?.focus())}>
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href={href({ page: 'runs' })}>
          <svg viewBox="0 0 32 32" width="24" height="24" aria-hidden="true">
            <rect width="32" height="32" rx="7" fill="currentColor" />
            <path d="M9 22l7-13 7 13M12 17h8" stroke="var(--brand-ink)" stroke-width="3" fill="none" stroke-linecap="round" stroke-linejoin="round" />
          </svg>
          <span>Agent Task Service</span>
        </a>
        <button type="button" class="btn menu-button" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <nav id="nav" class={menuOpen ? 'open' : ''} aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.label}>
                <a href={href(n.route)} aria-current={n.pages.includes(route.page) ? 'page' : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
          <button type="button" class="btn sign-out" onClick={onSignOut}>
            Sign out
          </button>
        </nav>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1}>
        <PageBoundary key={href(route)} route={route} />
      </main>
    </>
  );
}

export function App() {
  const route = useHashRoute();
  const [key, setKey] = useState<string | null>(() => storedKey());
  const client: AgentTaskService | null = useMemo(() => (key ? makeClient(key) : null), [key]);
  const signOut = () => {
    clearKey();
    setKey(null);
  };
  if (!client) return <SignInPage onSignedIn={setKey} />;
  return (
    <ClientContext.Provider value={client}>
      <SignOutContext.Provider value={signOut}>
        <Shell route={route} onSignOut={signOut} />
      </SignOutContext.Provider>
    </ClientContext.Provider>
  );
}
