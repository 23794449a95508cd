/**
 * The browser-pool client as the workers use it: a call that finds the pool unavailable (it is
 * restarting, or its channel is reconnecting) is tried again with backoff for a bounded time
 * instead of failing the run at once. Only UNAVAILABLE is tried again: either the call never
 * reached the pool, or the pool refused it before changing anything (its handlers clean up before
 * they answer UNAVAILABLE), so trying again does not repeat an action.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { RemoteError, Status, UnavailableError } from '../../common/src/errors.js';
import type { Logger } from '../../common/src/logger.js';
import type { RunClients } from './clients.js';

const MAX_DELAY_MS = 4000;

export interface RetryOptions {
  /** How long to keep trying, from the first attempt. */
  budgetMs: number;
  /** First pause; it doubles up to MAX_DELAY_MS. */
  firstDelayMs?: number;
  logger?: Logger;
}

/** `call()`, tried again while it fails with UNAVAILABLE and `budgetMs` allows; then a clear UnavailableError. */
export async function retryWhileUnavailable<T>(what: string, call: () => Promise<T>, o: RetryOptions): Promise<T> {
  const until = Date.now() + o.budgetMs;
  let delay = o.firstDelayMs ?? 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof RemoteError && err.code === Status.UNAVAILABLE)) throw err;
      const left = until - Date.now();
      if (left <= 0) {
        throw new UnavailableError(`The browser service was unavailable for ${Math.round(o.budgetMs / 1000)} s; try again later`, { cause: err });
      }
      o.logger?.warn({ call: what, attempt, retryInMs: Math.min(delay, left) }, 'browser service unavailable; trying again');
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}

/** The worker's clients: the same, except that the pool's unary calls wait out a pool restart. */
export function withPoolRetries(clients: RunClients, o: RetryOptions): RunClients {
  const api = clients.browserPool.api;
  const wrapped = new Proxy(api, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function' || typeof key !== 'string') return value;
      const fn = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        const first = fn.apply(target, args);
        // Only unary calls answer with a promise; streams are returned as they are.
        if (!(first instanceof Promise)) return first;
        let used = false;
        return retryWhileUnavailable(key, () => (used ? (fn.apply(target, args) as Promise<unknown>) : ((used = true), first)), o);
      };
    },
  });
  return { ...clients, browserPool: { ...clients.browserPool, api: wrapped } };
}
