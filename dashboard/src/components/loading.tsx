/** A quiet "Loading…" line (announced politely). */
export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="muted loading" role="status">
      {what}…
    </p>
  );
}
