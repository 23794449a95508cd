/**
 * The in-page half of the observation: runs inside one frame's document (through
 * `Frame.evaluate`, as source text) and walks its flat tree — open shadow roots and slots
 * included — in DOM order. It gives every interactive element a stable index (a data attribute
 * that survives re-observation; numbers come from one counter per tab, so they are unique across
 * frames and never reused after a navigation) and returns lines of text and elements with their
 * vertical position, so the caller can centre what it shows on the viewport.
 *
 * It must be self-contained: no imports, no closures over module scope.
 */

export interface FrameLine {
  /** Top of the line in document pixels. */
  y: number;
  /** A text line or an element line; absent for a frame placeholder. */
  text?: string;
  /** The `data-ats-frame` id of an iframe to splice in here. */
  frame?: string;
  /** The element's index, for element lines. */
  index?: number;
}

export interface FrameElement {
  index: number;
  tag: string;
  role: string;
  type: string;
  text: string;
  label: string;
  placeholder: string;
  name: string;
  id: string;
  href: string;
  options?: string[];
  /** A scroll container: pixels of its content hidden above and below its visible part. */
  scroll?: { above: number; below: number };
  /** Shown only because it scrolls (no role, not clickable): not a click or typing target. */
  container?: true;
}

export interface FrameSnapshot {
  next: number;
  /** The lines within the window around the viewport. */
  lines: FrameLine[];
  /** Lines left out above and below the window. */
  above: number;
  below: number;
  elements: FrameElement[];
  scrollY: number;
  scrollHeight: number;
  viewportHeight: number;
}

/**
 * Runs in the page. `next` is the first free index; returns the next free one. Lines within
 * `screens` screens above and below the viewport are returned; the others only counted.
 * `closed` are the document's closed shadow roots, found at the CDP level (a page script cannot
 * reach them): the walk descends into them as into open ones.
 */
export function snapshotFrame(args: { next: number; screens: number }, ...closed: ShadowRoot[]): FrameSnapshot {
  const doc = document;
  const closedOf = new Map<Element, ShadowRoot>(closed.map((r) => [r.host, r]));
  const root = doc.documentElement as HTMLElement;
  const firstLook = root.dataset.atsSeen !== '1';
  root.dataset.atsSeen = '1';
  let next = args.next;
  let frameIds = Number(root.dataset.atsFrames ?? '0');
  const scrollY = window.scrollY;
  const vh = window.innerHeight;
  const vw = window.innerWidth;
  const from = scrollY - args.screens * vh;
  const to = scrollY + (1 + args.screens) * vh;
  const inWindow = (y: number) => y >= from && y < to;
  let above = 0;
  let below = 0;
  const lines: FrameLine[] = [];
  const push = (l: FrameLine) => {
    if (l.y < from) above++;
    else if (l.y >= to) below++;
    else lines.push(l);
  };
  const elements: FrameElement[] = [];
  const range = doc.createRange();

  const ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'option', 'combobox', 'listbox', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem', 'gridcell', 'textbox', 'searchbox', 'slider', 'spinbutton']);
  /** Roles whose name is their content: their text is not repeated as page text. */
  const NAMED_BY_CONTENT = new Set(['combobox', 'button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem', 'gridcell', 'textbox', 'searchbox']);
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'svg']);
  const clean = (s: string | null | undefined, max = 100) => {
    const t = (s ?? '').replace(/\s+/g, ' ').trim();
    return t.length > max ? `${t.slice(0, max - 1)}…` : t;
  };
  const q = (s: string) => JSON.stringify(s);
  /** The value format of inputs whose text is not free (what `type` into them expects). */
  const FORMATS: Record<string, string> = { date: 'YYYY-MM-DD', time: 'HH:MM', 'datetime-local': 'YYYY-MM-DDTHH:MM', month: 'YYYY-MM', week: 'YYYY-Www', color: '#rrggbb' };
  /** How far `el` scrolls vertically in its own box, or undefined when it does not (style already read). */
  const scrollOf = (el: HTMLElement, style: CSSStyleDeclaration): { above: number; below: number } | undefined => {
    const oy = style.overflowY;
    if ((oy !== 'auto' && oy !== 'scroll' && oy !== 'overlay') || el === doc.body || el === root) return undefined;
    const h = el.clientHeight;
    if (h <= 0 || el.scrollHeight <= h + 2) return undefined;
    return { above: Math.round(el.scrollTop), below: Math.max(0, Math.round(el.scrollHeight - h - el.scrollTop)) };
  };

  let line = '';
  let lineY = -1;
  const flush = () => {
    const t = line.replace(/\s+/g, ' ').trim();
    if (t) push({ y: lineY < 0 ? 0 : lineY, text: t.length > 2000 ? `${t.slice(0, 1999)}… (line cut)` : t });
    line = '';
    lineY = -1;
  };

  function implicitRole(el: HTMLElement): string {
    const tag = el.tagName;
    const type = ((el as HTMLInputElement).type ?? '').toLowerCase();
    if (tag === 'A' && el.hasAttribute('href')) return 'link';
    if (tag === 'BUTTON' || tag === 'SUMMARY') return 'button';
    if (tag === 'TEXTAREA') return 'textbox';
    if (tag === 'SELECT') return (el as HTMLSelectElement).multiple || (el as HTMLSelectElement).size > 1 ? 'listbox' : 'combobox';
    if (tag === 'INPUT') {
      if (type === 'hidden') return '';
      if (['button', 'submit', 'reset', 'image'].includes(type)) return 'button';
      if (type === 'checkbox') return 'checkbox';
      if (type === 'radio') return 'radio';
      if (type === 'range') return 'slider';
      if (type === 'number') return 'spinbutton';
      if (type === 'search') return 'searchbox';
      if (type === 'file') return 'file';
      return 'textbox';
    }
    return '';
  }

  function labelOf(el: HTMLElement): string {
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const r = el.getRootNode() as Document | ShadowRoot;
      const t = by.split(/\s+/).map((id) => (r.getElementById?.(id) ?? doc.getElementById(id))?.textContent ?? '').join(' ');
      if (clean(t)) return clean(t);
    }
    const labels = (el as HTMLInputElement).labels;
    if (labels && labels.length) return clean(Array.from(labels).map((l) => l.innerText).join(' '));
    return clean(el.getAttribute('aria-label') || el.getAttribute('title') || '');
  }

  function covered(el: HTMLElement, r: DOMRect): boolean {
    const cx = r.left + r.width / 2;
    const cy = r.top + r.height / 2;
    if (cx < 0 || cy < 0 || cx > vw || cy > vh) return false;
    const hit = (el.getRootNode() as Document | ShadowRoot).elementFromPoint(cx, cy);
    if (!hit || hit === el || el.contains(hit) || hit.contains(el)) return false;
    const labels = (el as HTMLInputElement).labels;
    if (labels && Array.from(labels).some((l) => l.contains(hit))) return false;
    return true;
  }

  /** The element's line (only when `shown`: state costs layout reads) and what the builtin matches on. */
  function describe(el: HTMLElement, role: string, r: DOMRect, shown: boolean, scroll: { above: number; below: number } | undefined): { line: string; info: FrameElement } {
    const tag = el.tagName;
    const input = el as HTMLInputElement;
    const type = tag === 'INPUT' ? (input.type ?? '').toLowerCase() : '';
    const container = role === 'scrollable';
    // A scroll container is named by its label or its first heading, never by all it holds.
    const label = labelOf(el) || (container ? clean(el.querySelector('h1,h2,h3,h4,h5,h6')?.textContent) : '');
    // innerText needs layout; far from the viewport textContent does for the builtin's matching.
    const ownText = container ? '' : clean((shown ? el.innerText : el.textContent) || (tag === 'INPUT' && ['submit', 'button', 'reset'].includes(type) ? input.value : '') || (el.querySelector('img[alt]')?.getAttribute('alt') ?? ''));
    if (!el.dataset.atsIdx) el.dataset.atsIdx = String(next++);
    const index = Number(el.dataset.atsIdx);
    const info: FrameElement = {
      index,
      tag: tag.toLowerCase(),
      role: el.getAttribute('role') ?? (container ? 'scrollable' : ''),
      type,
      text: ownText,
      label,
      placeholder: input.placeholder ?? '',
      name: el.getAttribute('name') ?? '',
      id: el.id,
      href: tag === 'A' ? ((el as HTMLAnchorElement).href ?? '') : '',
      ...(tag === 'SELECT' ? { options: Array.from((el as HTMLSelectElement).options).map((o) => o.text.trim()) } : {}),
      ...(scroll ? { scroll } : {}),
      ...(container ? { container: true as const } : {}),
    };
    if (!shown) return { line: '', info };
    const textual = role === 'textbox' || role === 'searchbox' || role === 'spinbutton' || role === 'combobox' || role === 'slider' || tag === 'SELECT';
    const name = label || (textual ? '' : ownText) || clean(input.placeholder ?? '') || clean(el.getAttribute('name'));
    const states: string[] = [];
    if (tag === 'SELECT') {
      const sel = el as HTMLSelectElement;
      const chosen = Array.from(sel.selectedOptions).map((o) => clean(o.text));
      states.push(`selected=${q(chosen.join(', '))}`);
      const opts = Array.from(sel.options).map((o) => clean(o.text, 40));
      states.push(`options: ${opts.slice(0, 12).join(' | ')}${opts.length > 12 ? ` | … ${opts.length - 12} more` : ''}`);
    } else if (type === 'password') {
      if (input.value) states.push('value=(hidden password)');
    } else if (type === 'file') {
      if (input.files?.length) states.push(`file=${q(Array.from(input.files).map((f) => f.name).join(', '))}`);
    } else if (type === 'checkbox' || type === 'radio') {
      states.push(input.checked ? 'checked' : 'unchecked');
    } else if (tag === 'INPUT' || tag === 'TEXTAREA') {
      if (!['submit', 'button', 'reset', 'image'].includes(type)) {
        if (input.value) states.push(`value=${q(clean(input.value, 200))}`);
        else if (input.placeholder && name !== clean(input.placeholder)) states.push(`placeholder=${q(clean(input.placeholder))}`);
      }
      // A field that takes a value in one format, or a number within bounds, says so: typing free text into it fails.
      if (FORMATS[type]) states.push(`type=${type} format=${FORMATS[type]}`);
      else if (type === 'range' || type === 'number') states.push(`type=${type}`);
      if (FORMATS[type] || type === 'range' || type === 'number') {
        for (const b of ['min', 'max', 'step']) {
          const v = input.getAttribute(b) ?? (type === 'range' ? { min: '0', max: '100', step: '1' }[b]! : null);
          if (v !== null && v !== '') states.push(`${b}=${v}`);
        }
      }
    } else if (el.isContentEditable || role === 'textbox' || role === 'searchbox') {
      const v = clean(el.innerText, 200);
      if (v) states.push(`value=${q(v)}`);
    } else if (role === 'combobox') {
      const v = clean(el.innerText, 100);
      if (v && v !== name) states.push(`value=${q(v)}`);
    } else if (role === 'slider' || role === 'spinbutton') {
      // A scripted slider's value and bounds are in its ARIA attributes.
      const v = el.getAttribute('aria-valuetext') ?? el.getAttribute('aria-valuenow');
      if (v !== null) states.push(`value=${q(clean(v))}`);
      for (const b of ['min', 'max']) {
        const x = el.getAttribute(`aria-value${b}`);
        if (x !== null) states.push(`${b}=${x}`);
      }
    }
    if (scroll) states.push(`scrollable: ${scroll.above} px hidden above, ${scroll.below} px below`);
    if (role !== 'draggable' && el.getAttribute('draggable') === 'true') states.push('draggable');
    const aria = (a: string) => el.getAttribute(a);
    if (aria('aria-checked') === 'true') states.push('checked');
    else if (aria('aria-checked') === 'mixed') states.push('mixed');
    else if (aria('aria-checked') === 'false' && type !== 'checkbox' && type !== 'radio') states.push('unchecked');
    if (aria('aria-pressed') === 'true') states.push('pressed');
    if (aria('aria-selected') === 'true') states.push('selected');
    if (aria('aria-expanded') === 'true') states.push('expanded');
    else if (aria('aria-expanded') === 'false') states.push('collapsed');
    if ((input.disabled as boolean | undefined) || aria('aria-disabled') === 'true') states.push('disabled');
    if ((input.required as boolean | undefined) || aria('aria-required') === 'true') states.push('required');
    let invalid = aria('aria-invalid') === 'true';
    try {
      invalid ||= el.matches(':user-invalid');
    } catch {
      /* an older engine without :user-invalid */
    }
    if (invalid) states.push('invalid');
    if ((input.readOnly as boolean | undefined) || aria('aria-readonly') === 'true') states.push('readonly');
    if (role === 'link' && !name) states.push(`href=${q(clean((el as HTMLAnchorElement).href, 120))}`);
    if (covered(el, r)) states.push('covered');
    const isNew = !firstLook && index >= args.next;
    const line = `${isNew ? '*' : ''}[${index}] ${role}${name ? ` ${q(name)}` : ''}${states.length ? ` ${states.join(' ')}` : ''}`;
    return { line, info };
  }

  function walkChildren(node: Node, ctx: { suppress: boolean; cursor: string; inInteractive: boolean }) {
    const el = node as HTMLElement;
    let kids: ArrayLike<Node>;
    const shadow = el.shadowRoot ?? closedOf.get(el);
    if (shadow) kids = shadow.childNodes;
    else if (el.tagName === 'SLOT') {
      const assigned = (el as unknown as HTMLSlotElement).assignedNodes({ flatten: true });
      kids = assigned.length ? assigned : el.childNodes;
    } else kids = node.childNodes;
    for (let i = 0; i < kids.length; i++) walk(kids[i]!, ctx);
  }

  function walk(node: Node, ctx: { suppress: boolean; cursor: string; inInteractive: boolean }) {
    if (node.nodeType === 3) {
      if (ctx.suppress) return;
      const data = (node as Text).data;
      if (!data.trim()) {
        if (line) line += ' ';
        return;
      }
      if (lineY < 0) {
        range.selectNodeContents(node);
        const r = range.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) return;
        lineY = r.top + scrollY;
      }
      line += data;
      return;
    }
    if (node.nodeType !== 1) return;
    const el = node as HTMLElement;
    if (SKIP.has(el.tagName)) return;
    const style = getComputedStyle(el);
    if (style.display === 'none') return;
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
      flush();
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || style.visibility === 'hidden') return;
      if (!el.dataset.atsFrame) el.dataset.atsFrame = String(++frameIds);
      push({ y: r.top + scrollY, frame: el.dataset.atsFrame });
      return;
    }
    const block = !style.display.startsWith('inline') && style.display !== 'contents';
    if (block || el.tagName === 'BR') flush();
    const hidden = style.visibility === 'hidden' || style.visibility === 'collapse';
    let role = el.getAttribute('role') ?? '';
    if (!ROLES.has(role)) role = implicitRole(el);
    const tabbable = el.hasAttribute('tabindex') && el.getAttribute('tabindex') !== '-1' && el !== doc.body;
    const editable = el.isContentEditable && !(el.parentElement?.isContentEditable ?? false);
    const clickable =
      !ctx.inInteractive &&
      el.tagName !== 'LABEL' &&
      el !== doc.body &&
      ((style.cursor === 'pointer' && ctx.cursor !== 'pointer') || el.hasAttribute('onclick') || typeof el.onclick === 'function');
    // Overflow does not apply to inline boxes: most elements (links, spans) skip the check.
    const scroll = hidden || (!block && style.display === 'inline') ? undefined : scrollOf(el, style);
    // An item only a drag moves (a sortable list's) is acted on like a control.
    const draggable = !ctx.inInteractive && el.getAttribute('draggable') === 'true';
    let interactive = !hidden && (Boolean(role) || tabbable || editable || clickable || draggable || Boolean(scroll));
    let r: DOMRect | undefined;
    if (interactive) {
      r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0 && role !== 'file') interactive = false;
      if ((el as HTMLInputElement).disabled === undefined && style.pointerEvents === 'none' && !role) interactive = false;
    }
    const childCtx = { suppress: ctx.suppress || hidden, cursor: style.cursor, inInteractive: ctx.inInteractive };
    if (interactive && r) {
      flush();
      const shownRole = role || (editable ? 'textbox' : clickable ? 'clickable' : draggable ? 'draggable' : scroll ? 'scrollable' : 'focusable');
      const y = r.top + scrollY;
      const d = describe(el, shownRole, r, inWindow(y), scroll);
      push({ y, text: d.line, index: d.info.index });
      elements.push(d.info);
      // A scroll container only frames what it holds: its content is read and acted on as usual.
      if (shownRole !== 'scrollable') childCtx.inInteractive = true;
      if (NAMED_BY_CONTENT.has(shownRole) || shownRole === 'clickable' || shownRole === 'draggable' || shownRole === 'focusable' || el.tagName === 'SELECT' || editable) childCtx.suppress = true;
    }
    // A label's text is already its control's name.
    if (el.tagName === 'LABEL' && (el as HTMLLabelElement).control) childCtx.suppress = true;
    if (el.tagName === 'SELECT' || el.tagName === 'TEXTAREA') return;
    walkChildren(el, childCtx);
    if (block || interactive) flush();
  }

  walk(doc.body ?? root, { suppress: false, cursor: 'auto', inInteractive: false });
  flush();
  root.dataset.atsFrames = String(frameIds);
  return { next, lines, above, below, elements, scrollY, scrollHeight: Math.max(root.scrollHeight, doc.body?.scrollHeight ?? 0), viewportHeight: vh };
}

/** Runs in the page: resolves once the DOM has been quiet for `quietMs` (or after `maxMs`). */
export function domQuiet(args: { quietMs: number; maxMs: number }): Promise<void> {
  return new Promise<void>((resolve) => {
    let quiet: ReturnType<typeof setTimeout>;
    const finish = () => {
      observer.disconnect();
      clearTimeout(quiet);
      clearTimeout(cap);
      resolve();
    };
    const observer = new MutationObserver(() => {
      clearTimeout(quiet);
      quiet = setTimeout(finish, args.quietMs);
    });
    observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    quiet = setTimeout(finish, args.quietMs);
    const cap = setTimeout(finish, args.maxMs);
  });
}

/**
 * Runs in the page: custom elements that may hold a closed shadow root (the page cannot tell;
 * the CDP can, for each), through open roots, at most `max`. One found to hold none is marked and
 * not asked about again (roots are attached when an element is made), or, while it is not
 * defined yet, not until it is (its constructor may attach one).
 */
export function closedShadowCandidates(max: number): Element[] {
  const out: Element[] = [];
  const visit = (root: Document | ShadowRoot) => {
    const all = root.querySelectorAll('*');
    for (let i = 0; i < all.length && out.length < max; i++) {
      const el = all[i] as HTMLElement;
      if (el.shadowRoot) visit(el.shadowRoot);
      else if (el.tagName.includes('-') && el.dataset.atsNoClosed !== '1' && !(el.dataset.atsNoClosed === 'undefined' && !el.matches(':defined'))) out.push(el);
    }
  };
  visit(document);
  return out;
}

/** Runs in the page: marks custom elements that hold no closed shadow root (see closedShadowCandidates). */
export function markWithoutClosed(_: null, ...els: HTMLElement[]): void {
  for (const el of els) el.dataset.atsNoClosed = el.matches(':defined') ? '1' : 'undefined';
}

/** Runs in the page: the first element matching `selector` inside the closed shadow roots `roots` (and open roots within them). */
export function queryInClosed(selector: string, ...roots: ShadowRoot[]): Element | null {
  const search = (r: ParentNode): Element | null => {
    const hit = r.querySelector(selector);
    if (hit) return hit;
    const all = r.querySelectorAll('*');
    for (let i = 0; i < all.length; i++) {
      const inner = all[i]!.shadowRoot;
      const found = inner ? search(inner) : null;
      if (found) return found;
    }
    return null;
  };
  for (const r of roots) {
    const found = search(r);
    if (found) return found;
  }
  return null;
}
