/** How a run's result is shown: JSON pretty-printed, a program's output as is, anything else as Markdown (pure). */

export type ResultView = { kind: 'json'; text: string } | { kind: 'markdown'; text: string } | { kind: 'text'; text: string } | { kind: 'empty' };

/**
 * Whether a result reads as a program's output (columns aligned with runs of spaces or tabs, as
 * `ls -l` or a table printed by a command): Markdown would run its lines together.
 */
function looksPreformatted(text: string): boolean {
  const lines = text.split('\n').filter((l) => l.trim());
  if (lines.length < 3) return false;
  const aligned = lines.filter((l) => /\S( {2,}|\t)\S/.test(l)).length;
  return aligned * 2 >= lines.length;
}

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
  if (looksPreformatted(t) && !/^(#|[-*] |\d+\. |\|)/m.test(t)) return { kind: 'text', text: result };
  return { kind: 'markdown', text: result };
}
