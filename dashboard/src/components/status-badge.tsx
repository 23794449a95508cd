/** A run's or browser's status as a coloured word (the word carries the meaning, not the colour). */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status}</span>;
}
