/**
 * The page's Content-Security-Policy allows only stylesheets from this origin and style elements
 * carrying the nonce the gateway put on this page (`<meta property="csp-nonce">`). xterm.js
 * writes `<style>` elements at run time; those made by this page's own code get the nonce, while
 * a style element smuggled in as markup (a Markdown result, say) still gets none and is refused.
 */
export function adoptStyleNonce(doc: Document = document): void {
  const meta = doc.querySelector<HTMLMetaElement>('meta[property="csp-nonce"]');
  // The attribute is hidden once parsed (nonce hiding); the property keeps the value.
  const nonce = meta?.nonce || meta?.getAttribute('nonce') || '';
  if (!nonce) return;
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function createElement(this: Document, tag: string, options?: ElementCreationOptions) {
    const el = create.call(this, tag, options);
    if (tag.toLowerCase() === 'style') (el as HTMLStyleElement).nonce = nonce;
    return el;
  } as typeof create;
}
