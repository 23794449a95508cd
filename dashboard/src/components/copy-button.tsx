/** Copies a text to the clipboard and says so (announced to screen readers). */
import { useState } from 'preact/hooks';

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState('copied');
    } catch {
      setState('failed');
    }
    setTimeout(() => setState('idle'), 2000);
  };
  return (
    <button type="button" class="btn btn-small" onClick={copy} aria-label={label === 'Copy' ? undefined : label}>
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed' : label}
      <span class="visually-hidden" aria-live="polite">
        {state === 'copied' ? 'Copied to the clipboard' : state === 'failed' ? 'Could not copy; select the text instead' : ''}
      </span>
    </button>
  );
}
