/** Answers that must be JSON: when a task asks for it, the answer is checked to parse. */

/** The text without a Markdown code fence around it (trimmed). */
export function unfence(text: string): string {
  const m = /^```[a-z]*\s*\n([\s\S]*?)\n?```$/i.exec(text.trim());
  return m ? m[1]!.trim() : text.trim();
}

/** Whether the task asks for a JSON answer (names JSON or shows an object shape). */
export function wantsJson(task: string): boolean {
  return /\bjson\b/i.test(task) || /\{\s*"[^"\n]+"\s*:/.test(task);
}

/** The answer without a Markdown code fence around it, and why it is not JSON (undefined when it parses). */
export function checkJson(answer: string): { text: string; problem?: string } {
  const text = unfence(answer);
  try {
    JSON.parse(text);
    return { text };
  } catch (err) {
    return { text, problem: (err as Error).message.split('\n')[0]! };
  }
}
