/**
 * Delivers claimed deliveries: one signed POST each, bounded in time and size, no redirects
 * followed; 2xx is success, 410 disables the endpoint, anything else (or no answer) is retried
 * after a pause that doubles with jitter, until the retry window is over. An endpoint failing
 * every attempt for WEBHOOK_DISABLE_AFTER_MS is disabled with a note.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Logger } from '../../common/src/logger.js';
import { WakeLoop } from '../../common/src/wake-loop.js';
import { signedHeaders } from './standard-webhooks.js';
import { guardedLookup, refusal, type UrlPolicy } from './url-guard.js';
import type { AttemptOutcome, ClaimedDelivery, WebhookRepository } from './webhook.repository.js';

export interface DispatcherOptions {
  repo: WebhookRepository;
  logger: Logger;
  policy: UrlPolicy;
  timeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  retryWindowMs: number;
  disableAfterMs: number;
  pollMs: number;
  concurrency: number;
}

/** The part of a receiver's answer kept (in an error), never the whole of it. */
const EXCERPT_BYTES = 200;
const USER_AGENT = 'agent-task-service-webhooks/1';

/** The pause before attempt n+1 after n failed ones: base·2^(n-1), ±20 % jitter, at most max. */
export function backoffMs(failed: number, baseMs: number, maxMs: number, random = Math.random): number {
  const raw = Math.min(baseMs * 2 ** Math.max(0, failed - 1), maxMs);
  return Math.round(raw * (0.8 + 0.4 * random()));
}

/** One POST of `body` to `url`, with the signature headers; never throws. */
export function post(url: string, body: string, headers: Record<string, string>, policy: UrlPolicy, timeoutMs: number): Promise<AttemptOutcome> {
  const at = new Date();
  const started = performance.now();
  const done = (statusCode: number | null, error: string | null): AttemptOutcome => ({ statusCode, error, latencyMs: Math.round(performance.now() - started), at });
  return new Promise((resolve) => {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    // An IP in the URL is not looked up: it is checked here (a name is checked by the lookup).
    const literal = net.isIP(host) ? refusal(host, policy) : undefined;
    if (literal) return resolve(done(null, `refused: the URL names ${literal}`));
    const lib = u.protocol === 'https:' ? https : http;
    const req = lib.request(u, {
      method: 'POST',
      agent: false,
      lookup: guardedLookup(policy),
      timeout: timeoutMs,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': USER_AGENT },
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('response', (res) => {
      const code = res.statusCode ?? 0;
      if (code >= 200 && code < 300) {
        clearTimeout(timer);
        res.resume();
        res.destroy();
        return resolve(done(code, null));
      }
      // Redirects are not followed (the target was not checked); the answer is cut to an excerpt.
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = () => {
        clearTimeout(timer);
        res.destroy();
        const text = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8').replace(/[^\x20-\x7e]+/g, ' ').trim();
        resolve(done(code, `HTTP ${code}${code >= 300 && code < 400 ? ' (redirects are not followed)' : ''}${text ? `: ${text}` : ''}`));
      };
      res.on('data', (c: Buffer) => {
        if (size < EXCERPT_BYTES) chunks.push(c);
        size += c.length;
        if (size >= EXCERPT_BYTES) finish();
      });
      res.on('end', finish);
      res.on('error', finish);
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      resolve(done(null, err.message.slice(0, EXCERPT_BYTES)));
    });
    req.end(body);
  });
}

export class Dispatcher {
  readonly #o: DispatcherOptions;
  readonly #loop: WakeLoop;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(o: DispatcherOptions) {
    this.#o = o;
    this.#loop = new WakeLoop(() => this.#pass(), o.pollMs, (err) => o.logger.warn({ err: err.message }, 'webhook dispatch pass failed'));
  }

  /** A claim lease: twice an attempt's bound; after it another dispatcher (or this one, restarted) takes the delivery over. */
  get leaseMs(): number {
    return this.#o.timeoutMs * 2;
  }

  start(): void {
    this.#loop.wake();
  }

  /** Looks for due deliveries now (new events call this). */
  wake(): void {
    this.#loop.wake();
  }

  async #pass(): Promise<void> {
    for (;;) {
      const room = this.#o.concurrency - this.#inFlight.size;
      if (room <= 0) return;
      const claimed = await this.#o.repo.claim(room, this.leaseMs);
      for (const d of claimed) {
        const p = this.#deliver(d)
          .catch((err: Error) => this.#o.logger.error({ deliveryId: d.id, err: err.message }, 'delivery not settled (its lease lets it be retried)'))
          .finally(() => {
            this.#inFlight.delete(p);
            // A settled delivery may let the next of its run go.
            this.wake();
          });
        this.#inFlight.add(p);
      }
      if (claimed.length < room) return;
    }
  }

  async #deliver(d: ClaimedDelivery): Promise<void> {
    const o = this.#o;
    const outcome = await post(d.url, d.body, signedHeaders(d.secrets, d.eventId, d.body), o.policy, o.timeoutMs);
    const ok = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300;
    const log = { deliveryId: d.id, endpointId: d.endpointId, eventId: d.eventId, type: d.eventType, status: outcome.statusCode, ms: outcome.latencyMs };
    if (ok) {
      o.logger.debug(log, 'webhook delivered');
      return o.repo.settle(d, outcome, undefined);
    }
    if (outcome.statusCode === 410) {
      o.logger.info(log, 'webhook endpoint answered 410 Gone: disabled');
      return o.repo.settle(d, outcome, undefined, 'The receiver answered 410 Gone');
    }
    const now = Date.now();
    const next = new Date(now + backoffMs(d.attempts + 1, o.retryBaseMs, o.retryMaxMs));
    const giveUp = next.getTime() - Date.parse(d.createdAt) > o.retryWindowMs;
    const since = await o.repo.failingSince(d.endpointId);
    const disable = since && now - since.getTime() >= o.disableAfterMs ? `Every delivery failed since ${since.toISOString()}` : undefined;
    o.logger.info({ ...log, error: outcome.error, retryAt: giveUp ? null : next.toISOString() }, 'webhook attempt failed');
    return o.repo.settle(d, outcome, giveUp ? undefined : next, disable);
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    await Promise.all(this.#inFlight);
  }
}
