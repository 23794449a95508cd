/** Markdown rendered safely (the renderer is loaded on first use); the raw text shows meanwhile. */
import { useEffect, useState } from 'preact/hooks';

export function Markdown({ text }: { text: string }) {
  const [html, setHtml] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    import('../lib/markdown.ts').then(
      (m) => live && setHtml(m.renderMarkdown(text)),
      () => undefined, // the raw text stays: still readable
    );
    return () => {
      live = false;
    };
  }, [text]);
  if (html === null) return <pre class="pre-wrap">{text}</pre>;
  // Sanitised by DOMPurify in renderMarkdown: the one place the page takes HTML as a string.
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}
