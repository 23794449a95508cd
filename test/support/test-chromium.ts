/** The Chromium a test launches for itself (a page to drive, a viewer, a person at the dashboard). */
import puppeteer, { type Browser } from 'puppeteer-core';

/** Quiet, and without the omnibox popup headless Chromium renders in a renderer of its own at every launch (half a launch's CPU). */
export const TEST_CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup'];

export function launchTestChromium(): Promise<Browser> {
  return puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: TEST_CHROMIUM_ARGS });
}
