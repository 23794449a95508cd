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

/** Terminal escape sequences (colours, cursor moves) and other control characters, which a result may carry from a command's output. */
const CONTROL = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[\]P^_][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;

export function resultView(raw: string | null): ResultView {
  const result = raw?.replace(CONTROL, '').replace(/\r\n?/g, '\n') ?? null;
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
