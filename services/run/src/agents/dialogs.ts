/**
 * JavaScript dialogs (alert, confirm, prompt, beforeunload) answered as soon as they open, so an
 * action that raises one does not hang the page; what they said is kept for the model.
 */
import type { Browser, Dialog, Page, Target } from 'puppeteer-core';
import { fencePageContent } from './page-content.js';

/** Watches every tab of a browser for one run; `stop()` removes its listeners (the browser may outlive the run). */
export class DialogWatcher {
  readonly #browser: Browser;
  readonly #watched = new Map<Page, (d: Dialog) => void>();
  #seen: string[] = [];
  readonly #onTarget = (t: Target) => {
    void t
      .page()
      .then((p) => p && this.watch(p))
      .catch(() => undefined);
  };

  constructor(browser: Browser) {
    this.#browser = browser;
    browser.on('targetcreated', this.#onTarget);
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
    this.#browser.off('targetcreated', this.#onTarget);
    for (const [page, handler] of this.#watched) page.off('dialog', handler);
    this.#watched.clear();
  }
}
