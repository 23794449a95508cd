/** A page loaded on first visit (its code is a chunk of its own: the first load stays small). */
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNotice } from './components/error-notice.tsx';
import { Loading } from './components/loading.tsx';

export function lazyPage<P extends object>(load: () => Promise<{ default: ComponentType<P> }>): ComponentType<P> {
  let loaded: ComponentType<P> | undefined;
  let pending: Promise<ComponentType<P>> | undefined;
  return function LazyPage(props: P) {
    const [Page, setPage] = useState<ComponentType<P> | undefined>(() => loaded);
    const [error, setError] = useState<unknown>(undefined);
    useEffect(() => {
      if (Page) return;
      pending ??= load().then((m) => (loaded = m.default));
      pending.then(
        (p) => setPage(() => p),
        (err: unknown) => {
          pending = undefined; // a later visit tries again (say, after a deploy replaced the chunks)
          setError(err);
        },
      );
    }, []);
    if (error) return <ErrorNotice error={new Error('This page could not be loaded; reload the dashboard.')} />;
    return Page ? <Page {...props} /> : <Loading />;
  };
}
