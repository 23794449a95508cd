/** How a run's result is shown: JSON pretty-printed, anything else as Markdown (pure). */

export type ResultView = { kind: 'json'; text: string } | { kind: 'markdown'; text: string } | { kind: 'empty' };

export function resultView(result: string | null): ResultView {
  if (result === null || !result.trim()) return { kind: 'empty' };
  const t = result.trim();
  // Only objects and arrays: a bare number or word reads better as text.
  if (/^[[{]/.test(t)) {
    try {
      return { kind: 'json', text: JSON.stringify(JSON.parse(t), null, 2) };
    } catch {
      /* not JSON after all */
    }
  }
  // A fenced JSON answer (```json … ```) is JSON too.
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n```$/.exec(t);
  if (fenced) {
    try {
      return { kind: 'json', text: JSON.stringify(JSON.parse(fenced[1]!), null, 2) };
    } catch {
      /* Markdown then */
    }
  }
  return { kind: 'markdown', text: result };
}
