/**
 * Notices a loop going nowhere: the same action again and again, or a page that does not change
 * step after step, and words a nudge for the model.
 */
import { createHash } from 'node:crypto';
import type { Observation } from './observe.js';

/** Steps of the same kind before the model is nudged. */
const REPEATS = 3;

export class LoopWatch {
  #actions: string[] = [];
  #pages: string[] = [];

  /** Call with each observation before the model decides; returns the nudges for this call. */
  look(o: Observation): string[] {
    this.#pages.push(createHash('sha1').update(`${o.url}\n${o.title}\n${o.text}\n${o.elements.length}`).digest('hex'));
    const nudges: string[] = [];
    const last = this.#actions.slice(-REPEATS);
    if (last.length === REPEATS && last.every((a) => a === last[0])) {
      nudges.push(`You did "${last[0]}" ${REPEATS} times in a row. Repeating it will not help: try something else, or call done with what you have.`);
    }
    const pages = this.#pages.slice(-(REPEATS + 1));
    if (this.#actions.length >= REPEATS && pages.length === REPEATS + 1 && pages.every((p) => p === pages[0])) {
      nudges.push(`The page has not changed in the last ${REPEATS} steps. Try another way (another element, scrolling, a different page), or call done with what you have.`);
    }
    return nudges;
  }

  /** Call with each action taken (its one-line description). */
  acted(description: string): void {
    this.#actions.push(description);
  }
}
