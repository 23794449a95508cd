/** Files chosen by drag and drop or the file picker (a labelled input: keyboard and screen readers work). */
import { useState } from 'preact/hooks';
import { formatBytes } from '../lib/format.ts';

export function FileDrop({ files, onChange, label = 'Files to attach', id = 'files' }: { files: File[]; onChange: (files: File[]) => void; label?: string; id?: string }) {
  const [over, setOver] = useState(false);
  const add = (list: FileList | null) => {
    if (!list?.length) return;
    const byName = new Map(files.map((f) => [f.name, f]));
    for (const f of Array.from(list)) byName.set(f.name, f); // one file per name: a later one replaces it, as on the disk
    onChange([...byName.values()]);
  };
  return (
    <div
      class={`drop ${over ? 'drop-over' : ''}`}
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        add(e.dataTransfer?.files ?? null);
      }}
    >
      <label for={id} class="drop-label">
        <strong>{label}</strong>
        <span class="muted">Drop files here, or choose them</span>
      </label>
      <input
        id={id}
        type="file"
        multiple
        onChange={(e) => {
          add((e.currentTarget as HTMLInputElement).files);
          (e.currentTarget as HTMLInputElement).value = '';
        }}
      />
      {files.length > 0 && (
        <ul class="drop-files" aria-label="Chosen files">
          {files.map((f) => (
            <li key={f.name}>
              <span class="mono">{f.name}</span> <span class="muted">{formatBytes(f.size)}</span>
              <button type="button" class="btn btn-small" aria-label={`Remove ${f.name}`} onClick={() => onChange(files.filter((x) => x !== f))}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
