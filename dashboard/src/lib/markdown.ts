/**
 * A run's result as safe HTML: Markdown by marked, then DOMPurify. A result repeats what web
 * pages said, so it is untrusted: no images (they would call out to any host), no styles, forms
 * or frames; links open in a new tab without a referrer.
 */
import DOMPurify from 'dompurify';
import { marked } from 'marked';

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
  const html = marked.parse(text, { async: false, gfm: true, breaks: false });
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'svg', 'math', 'video', 'audio', 'picture', 'source'],
    FORBID_ATTR: ['style', 'class', 'id'],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}
