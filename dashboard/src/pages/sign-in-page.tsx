/** Sign-in: the user pastes the project's API key once; it is checked against the API, then kept in this browser. */
import { useState } from 'preact/hooks';
import { makeClient, storeKey } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';

export function SignInPage({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) return;
    setBusy(true);
    setError(undefined);
    try {
      await makeClient(k).agents.list();
      storeKey(k);
      onSignedIn(k);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="sign-in">
      <div class="card sign-in-card">
        <h1>Agent Task Service</h1>
        <p>Start, watch and inspect agent runs and browsers. Sign in with your project's API key.</p>
        <form onSubmit={submit}>
          <label for="api-key">API key</label>
          <input
            id="api-key"
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={key}
            onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)}
            aria-describedby="api-key-help"
            required
          />
          <p id="api-key-help" class="muted small">
            <code>make up</code> prints one (it is also in <code>data/local-api-key</code>); <code>npm run keys -- create</code> makes more. The key stays in this
            browser's storage until you sign out.
          </p>
          <button type="submit" class="btn btn-primary" disabled={busy}>
            {busy ? 'Checking…' : 'Sign in'}
          </button>
        </form>
        <ErrorNotice error={error} />
      </div>
    </main>
  );
}
