/** An API error as the user sees it: the service's `detail`, the 422 items, the request id. */
import { useContext } from 'preact/hooks';
import { describeError, SignOutContext } from '../api.ts';

export function ErrorNotice({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const onSignOut = useContext(SignOutContext);
  if (error === undefined || error === null) return null;
  const p = describeError(error);
  return (
    <div class="notice notice-error" role="alert">
      <p class="notice-title">{p.title}</p>
      <p class="notice-detail">{p.detail}</p>
      {p.items.length > 0 && (
        <ul class="notice-items">
          {p.items.map((i) => (
            <li key={i}>{i}</li>
          ))}
        </ul>
      )}
      {(p.status !== null || p.requestId) && (
        <p class="notice-meta">
          {p.status !== null && <span>HTTP {p.status}</span>}
          {p.requestId && <span>request id {p.requestId}</span>}
        </p>
      )}
      {(onRetry || p.unauthorized) && (
        <p class="notice-actions">
          {onRetry && (
            <button type="button" class="btn" onClick={onRetry}>
              Try again
            </button>
          )}
          {p.unauthorized && (
            <button type="button" class="btn" onClick={onSignOut}>
              Sign in with another key
            </button>
          )}
        </p>
      )}
    </div>
  );
}
