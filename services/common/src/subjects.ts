/**
 * The NATS contract: every subject a service publishes or subscribes to is built and parsed here,
 * and every payload is a message of ats.common.v1 (proto/ats/common/v1/common.proto). A message
 * carries the id of the request it belongs to in its `x-request-id` header: `publish` takes it
 * from the request context, `subscribe` runs the callback in it.
 *
 * Payloads are the messages' canonical proto3 JSON (the generated toJSON/fromJSON), not binary:
 * the field names are the ones the JSON bodies already had, so a service of the previous release
 * still reads them during a rolling update, and `nats sub 'ats.>'` shows readable messages.
 */
import { headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { BrowserLifecycleEvent, RunEvent, RunStop, RunWakeup, type MessageFns } from '../../../gen/ats/common/v1/common.js';
import { currentRequestId, isRequestId, REQUEST_ID_HEADER, withRequestId, type Logger } from './logger.js';

/** The header of a NATS message that carries the request id. */

type Key = Record<string, string>;
type Codec<T> = Pick<MessageFns<T>, 'toJSON' | 'fromJSON'>;

/** One kind of NATS message: how its subject is built from a key and parsed back, and its payload. */
export interface Topic<K extends Key, T> {
  /** The subject with `{name}` for each part of the key, e.g. `ats.run.{runId}.stop`. */
  readonly template: string;
  readonly codec: Codec<T>;
  /** The subject of the message for `key`; throws on a key part that cannot be a subject token. */
  subject(key: K): string;
  /** A subscription subject: the given parts of the key, `*` for the others. */
  pattern(key?: Partial<K>): string;
  /** The key of a subject of this topic; undefined when the subject is not one. */
  parse(subject: string): K | undefined;
}

/** A subject token: not empty, no `.`, no wildcard, no whitespace. */
const TOKEN = /^[^.*>\s]+$/;

function topic<K extends Key, T>(template: string, codec: Codec<T>, choices: { [P in keyof K]?: readonly K[P][] } = {}): Topic<K, T> {
  const parts = template.split('.').map((t) => (t.startsWith('{') && t.endsWith('}') ? { param: t.slice(1, -1) } : { literal: t }));
  const valid = (name: string, v: string | undefined): v is string =>
    v !== undefined && TOKEN.test(v) && (choices[name as keyof K] === undefined || (choices[name as keyof K] as readonly string[]).includes(v));
  const token = (name: string, v: string | undefined): string => {
    if (!valid(name, v)) throw new Error(`${template}: ${name} ${JSON.stringify(v)} cannot be a subject token`);
    return v;
  };
  return {
    template,
    codec,
    subject: (key) => parts.map((p) => ('literal' in p ? p.literal : token(p.param, key[p.param]))).join('.'),
    pattern: (key = {}) =>
      parts.map((p) => ('literal' in p ? p.literal : (key as Key)[p.param] === undefined ? '*' : token(p.param, (key as Key)[p.param]))).join('.'),
    parse(subject) {
      const tokens = subject.split('.');
      if (tokens.length !== parts.length) return undefined;
      const key: Key = {};
      for (const [i, p] of parts.entries()) {
        if ('literal' in p) {
          if (tokens[i] !== p.literal) return undefined;
        } else if (valid(p.param, tokens[i])) key[p.param] = tokens[i]!;
        else return undefined;
      }
      return key as K;
    },
  };
}

/** What a browser lifecycle message announces. */
export type BrowserLifecycleKind = 'started' | 'stopped';

/** `ats.browser.<browserId>.started|stopped`: the pool started or stopped a browser. */
export const browserLifecycle = topic<{ browserId: string; kind: BrowserLifecycleKind }, BrowserLifecycleEvent>('ats.browser.{browserId}.{kind}', BrowserLifecycleEvent, {
  kind: ['started', 'stopped'],
});
/** `ats.run.<runId>.event`: an event was appended to a run (the database holds it; this only tells). */
export const runEvents = topic<{ runId: string }, RunEvent>('ats.run.{runId}.event', RunEvent);
/** `ats.run.<runId>.stop`: the run was stopped; the worker running it aborts. */
export const runStops = topic<{ runId: string }, RunStop>('ats.run.{runId}.stop', RunStop);
/** `ats.runs.wakeup`: a run may be claimable; every scheduler looks at the queue. */
export const runWakeups = topic<Record<never, string>, RunWakeup>('ats.runs.wakeup', RunWakeup);

/**
 * Publishes `payload` on the subject of `key`, with the current request id in its header. Throws
 * when the connection is closed; core NATS gives no delivery guarantee beyond that.
 */
export function publish<K extends Key, T>(nc: NatsConnection, t: Topic<K, T>, key: K, payload: T): void {
  const subject = t.subject(key);
  const data = JSON.stringify(t.codec.toJSON(payload));
  const requestId = currentRequestId();
  if (!requestId) return nc.publish(subject, data);
  const h = headers();
  h.set(REQUEST_ID_HEADER, requestId);
  return nc.publish(subject, data, { headers: h });
}

/** One received message: its key (from the subject), its payload (decoded when first read) and the request it belongs to. */
export interface Delivery<K, T> {
  key: K;
  readonly payload: T;
  requestId: string | undefined;
}

/** A message body that is not the topic's payload. */
class Undecodable extends Error {}

/** The payload of a message; an empty body is the empty message (a wake-up of the previous release had none). */
function decode<T>(codec: Codec<T>, msg: Msg): T {
  return codec.fromJSON(msg.data.length ? msg.json() : {});
}

/**
 * Subscribes to the messages of `t` whose key matches `filter` (every part left out matches any).
 * `onMessage` runs in the request context of the message's request id; a message whose payload
 * cannot be decoded when read, and an error thrown by `onMessage`, are logged and dropped.
 */
export function subscribe<K extends Key, T>(
  nc: NatsConnection,
  t: Topic<K, T>,
  onMessage: (d: Delivery<K, T>) => void,
  opts: { logger: Logger; filter?: Partial<K> },
): Subscription {
  return nc.subscribe(t.pattern(opts.filter), {
    callback: (err, msg) => {
      if (err) return opts.logger.warn({ topic: t.template, err: err.message }, 'subscription failed');
      const key = t.parse(msg.subject);
      if (!key) return undefined;
      const given = msg.headers?.get(REQUEST_ID_HEADER);
      const requestId = isRequestId(given) ? given : undefined;
      // Decoded only when a handler reads it: most only need to know that something happened.
      let decoded: { value: T } | undefined;
      const delivery: Delivery<K, T> = {
        key,
        requestId,
        get payload() {
          try {
            decoded ??= { value: decode(t.codec, msg) };
          } catch (e) {
            throw new Undecodable((e as Error).message);
          }
          return decoded.value;
        },
      };
      withRequestId(requestId, () => {
        try {
          onMessage(delivery);
        } catch (e) {
          if (e instanceof Undecodable) opts.logger.warn({ subject: msg.subject, err: e.message }, 'undecodable message dropped');
          else opts.logger.error({ subject: msg.subject, err: e }, 'message handler failed');
        }
      });
      return undefined;
    },
  });
}
