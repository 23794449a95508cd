/** Small hooks the pages share: loading data with cancellation, polling, the clock, the hash route. */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { parseHash, type Route } from './lib/router.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Loads again (keeping the data shown meanwhile). */
  reload: () => void;
  /** Replaces the data (after an action that returned the new state). */
  setData: (data: T) => void;
}

/**
 * Loads `load` when `deps` change (forgetting the data of the old deps), and again on `reload()`
 * (keeping the data shown meanwhile); a load still running then (or when the page goes) is aborted.
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const depsKey = useRef<unknown[] | null>(null);
  useEffect(() => {
    const ctrl = new AbortController();
    // New deps name another thing (another run, say): its predecessor's data must not show as its own.
    const same = depsKey.current !== null && depsKey.current.length === deps.length && depsKey.current.every((d, i) => Object.is(d, deps[i]));
    depsKey.current = deps;
    setState((s) => (same ? { ...s, loading: true } : { data: undefined, error: undefined, loading: true }));
    loadRef.current(ctrl.signal).then(
      (data) => !ctrl.signal.aborted && setState({ data, error: undefined, loading: false }),
      (error: unknown) => !ctrl.signal.aborted && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => ctrl.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const setData = useCallback((data: T) => setState({ data, error: undefined, loading: false }), []);
  return { ...state, reload, setData };
}

/** Calls `fn` every `ms` while `enabled` and the page is visible (a hidden tab does not poll). */
export function useInterval(fn: () => void, ms: number, enabled = true): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return undefined;
    const id = setInterval(() => {
      if (document.visibilityState === 'visible') fnRef.current();
    }, ms);
    return () => clearInterval(id);
  }, [ms, enabled]);
}

/** The current time, updated every `ms` (for running durations). */
export function useNow(ms = 1000, enabled = true): number {
  const [now, setNow] = useState(Date.now());
  useInterval(() => setNow(Date.now()), ms, enabled);
  return now;
}

/** The route of the location hash, following its changes. */
export function useHashRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** Whether the system asks for a dark theme (the live view follows it). */
export function usePrefersDark(): boolean {
  const query = '(prefers-color-scheme: dark)';
  const [dark, setDark] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const m = window.matchMedia(query);
    const on = () => setDark(m.matches);
    m.addEventListener('change', on);
    return () => m.removeEventListener('change', on);
  }, []);
  return dark;
}

/** Runs an action once at a time, keeping its error for the page to show. */
export function useAction<A extends unknown[], R>(act: (...args: A) => Promise<R>): { run: (...args: A) => Promise<R | undefined>; busy: boolean; error: unknown; clear: () => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const actRef = useRef(act);
  actRef.current = act;
  const run = useCallback(async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      return await actRef.current(...args);
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { run, busy, error, clear: useCallback(() => setError(undefined), []) };
}
