/** A name shown with a "Rename" button that turns it into a small form (Enter saves, Escape cancels). */
import { useEffect, useRef, useState } from 'preact/hooks';
import { useAction } from '../hooks.ts';
import { ErrorNotice } from './error-notice.tsx';

export function Renamable({ name, what, onRename }: { name: string; what: string; onRename: (name: string) => Promise<void> }) {
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(name);
  const input = useRef<HTMLInputElement>(null);
  const save = useAction(async () => {
    await onRename(value.trim());
    setEditing(false);
  });
  useEffect(() => {
    if (editing) input.current?.select();
  }, [editing]);
  if (!editing) {
    return (
      <span class="renamable">
        <span class="name">{name}</span>
        <button type="button" class="btn btn-small btn-ghost" onClick={() => (setValue(name), setEditing(true))} aria-label={`Rename ${what} ${name}`}>
          Rename
        </button>
      </span>
    );
  }
  return (
    <form
      class="rename"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim()) void save.run();
      }}
      onKeyDown={(e) => e.key === 'Escape' && setEditing(false)}
    >
      <input ref={input} value={value} maxLength={200} required aria-label={`New name of ${what} ${name}`} onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)} />
      <button type="submit" class="btn btn-small btn-primary" disabled={save.busy}>
        Save
      </button>
      <button type="button" class="btn btn-small" onClick={() => setEditing(false)}>
        Cancel
      </button>
      <ErrorNotice error={save.error} />
    </form>
  );
}
