/** A browsercode run's tool uses in order: what it did and why, files written or read as code blocks, errors. */
import { codeBlockOf, describeInput, type ToolUse } from '../lib/transcript.ts';

export function ToolUses({ uses }: { uses: ToolUse[] }) {
  if (!uses.length) return null;
  return (
    <ol class="tool-uses" aria-label="Tool uses">
      {uses.map((u) => {
        const block = codeBlockOf(u);
        const failed = u.result && !u.result.ok;
        return (
          <li key={u.number} class={`tool-use ${failed ? 'tool-use-failed' : ''}`}>
            <p class="tool-head">
              <span class="tool-name mono">{u.tool}</span> <span class="tool-input mono">{describeInput(u)}</span>
              {!u.result && <span class="muted small"> running…</span>}
            </p>
            {u.thought && <p class="tool-thought">{u.thought}</p>}
            {block && (
              <figure class="code-block">
                <figcaption class="mono small">{block.title}</figcaption>
                <pre tabIndex={0}>
                  <code>{block.text}</code>
                </pre>
              </figure>
            )}
            {u.result?.error && <p class="tool-error">{u.result.error}</p>}
          </li>
        );
      })}
    </ol>
  );
}
