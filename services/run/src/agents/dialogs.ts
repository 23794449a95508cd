/**
 * JavaScript dialogs (alert, confirm, prompt, beforeunload) answered as soon as they open, so an
 * action that raises one does not hang the page; what they said is kept for the model.
 */
import type { Browser, Dialog, Page, Target } from 'puppeteer-core';
import { fencePageContent } from './page-content.js';

/** Calls `watch` with each tab the browser opens from now on; returns what stops that. */
export function onNewTabs(browser: Browser, watch: (page: Page) => void): () => void {
  const onTarget = (t: Target) => {
    void t
      .page()
      .then((p) => p && watch(p))
      .catch(() => undefined);
  };
  browser.on('targetcreated', onTarget);
  return () => browser.off('targetcreated', onTarget);
}

/** Watches every tab of a browser for one run; `stop()` removes its listeners (the browser may outlive the run). */
export class DialogWatcher {
  readonly #watched = new Map<Page, (d: Dialog) => void>();
  #seen: string[] = [];
  readonly #unwatchTabs: () => void;

  constructor(browser: Browser) {
    this.#unwatchTabs = onNewTabs(browser, (p) => this.watch(p));
  }

  watch(page: Page): void {
    if (this.#watched.has(page)) return;
    const handler = (d: Dialog) => void this.#answer(d);
    this.#watched.set(page, handler);
    page.on('dialog', handler);
  }

  async #answer(d: Dialog): Promise<void> {
    const type = d.type();
    const message = d.message().replace(/\s+/g, ' ').trim().slice(0, 300);
    // The model asked for the action that raised it: go ahead (confirm, leave the page, the prompt's default).
    await d.accept(type === 'prompt' ? d.defaultValue() : undefined).catch(() => undefined);
    const what = type === 'alert' ? 'an alert' : type === 'beforeunload' ? 'a "leave this page?" dialog' : `a ${type} dialog`;
    this.#seen.push(`The page showed ${what}; it was ${type === 'alert' ? 'closed with OK' : 'accepted'}.${message ? ` It said: ${fencePageContent(message, type)}` : ''}`);
  }

  /** The dialogs answered since the last call. */
  take(): string[] {
    return this.#seen.splice(0);
  }

  stop(): void {
    this.#unwatchTabs();
    for (const [page, handler] of this.#watched) page.off('dialog', handler);
    this.#watched.clear();
  }
}
