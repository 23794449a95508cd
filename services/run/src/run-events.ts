/**
 * A run's events: appended to the database (the source of truth, a monotonic id per run) and
 * announced on NATS (the `runEvents` topic, `ats.run.<runId>.event`). `watch` streams backlog then live events; NATS only
 * wakes it early, every read comes from the database, so a watcher never sees a gap or a duplicate.
 */
import type { RunEvent } from '../../../gen/ats/common/v1/common.js';
import type { NatsConnection } from '../../common/src/bus.js';
import type { Logger } from '../../common/src/logger.js';
import { publish, runEvents, subscribe } from '../../common/src/subjects.js';
import { TERMINAL_EVENT_TYPES, type EventRow, type RunRepository } from './run.repository.js';

export const TERMINAL_EVENTS = new Set(TERMINAL_EVENT_TYPES);

/** An event as the contract (the run API and NATS) carries it. */
export const toRunEvent = (e: EventRow): RunEvent => ({ id: e.id, runId: e.runId, ts: e.ts, type: e.type, dataJson: JSON.stringify(e.data) });

export class RunEvents {
  readonly #repo: RunRepository;
  readonly #nc: NatsConnection;
  readonly #logger: Logger;

  constructor(repo: RunRepository, nc: NatsConnection, logger: Logger) {
    this.#repo = repo;
    this.#nc = nc;
    this.#logger = logger;
  }

  /** Appends and announces an event; undefined when the run has ended (nothing is recorded after its terminal event). */
  async append(runId: string, type: string, data: Record<string, unknown> = {}): Promise<EventRow | undefined> {
    const ev = await this.#repo.appendEvent(runId, type, data);
    if (!ev) {
      this.#logger.debug({ runId, type }, 'event dropped: the run has ended');
      return undefined;
    }
    try {
      publish(this.#nc, runEvents, { runId }, toRunEvent(ev));
    } catch (err) {
      this.#logger.warn({ runId, err: (err as Error).message }, 'event not published (watchers fall back to polling)');
    }
    return ev;
  }

  /** Events after `after`, then live ones as they come, ending after the terminal event. */
  async *watch(runId: string, after: number, signal: AbortSignal, pollMs = 2000): AsyncGenerator<EventRow> {
    let wake: (() => void) | undefined;
    const sub = subscribe(this.#nc, runEvents, () => wake?.(), { logger: this.#logger, filter: { runId } });
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    let last = after;
    try {
      while (!signal.aborted) {
        for (;;) {
          const page = await this.#repo.events(runId, last, 500);
          for (const ev of page.events) {
            last = ev.id;
            yield ev;
            if (TERMINAL_EVENTS.has(ev.type)) return;
          }
          if (!page.hasMore) break;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      sub.unsubscribe();
    }
  }
}
