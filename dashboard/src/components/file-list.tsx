/** Files with download links (presigned: they work without the key, for 15 minutes after listing). */
import { formatBytes, formatWhen } from '../lib/format.ts';

export interface ListedFile {
  id?: string;
  name: string;
  kind?: string;
  sizeBytes: number;
  downloadUrl: string;
  createdAt?: string;
  lastModified?: string;
}

export function FileList({ files, label, empty = 'No files.' }: { files: ListedFile[]; label: string; empty?: string }) {
  if (!files.length) return <p class="muted">{empty}</p>;
  return (
    <ul class="files" aria-label={label}>
      {files.map((f) => (
        <li key={f.id ?? f.name}>
          <a href={f.downloadUrl} download={f.name} class="mono">
            {f.name}
          </a>
          <span class="muted small">
            {f.kind ? `${f.kind} · ` : ''}
            {formatBytes(f.sizeBytes)}
            {f.createdAt || f.lastModified ? ` · ${formatWhen(f.createdAt ?? f.lastModified ?? null)}` : ''}
          </span>
        </li>
      ))}
    </ul>
  );
}
