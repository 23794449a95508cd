/**
 * A run's result as safe HTML: Markdown by marked, then DOMPurify. A result repeats what web
 * pages said, so it is untrusted: HTML written into it is shown as text (never parsed as markup),
 * and the sanitiser keeps only plain Markdown output — no images (they would call out to any
 * host), styles, forms or frames; links open in a new tab without a referrer.
 */
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const escapeHtml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML blocks and inline tags: as the text they are.
    html: ({ text }) => escapeHtml(text),
    // A Markdown image becomes a link to it: nothing is fetched unless the user follows it.
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

let hooked = false;

export function renderMarkdown(text: string): string {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer');
      }
    });
    hooked = true;
  }
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'svg', 'math', 'video', 'audio', 'picture', 'source'],
    FORBID_ATTR: ['style', 'class', 'id'],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}
