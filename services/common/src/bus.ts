/** NATS connection (v3 client) that keeps reconnecting, says whether it is connected, and drains on stop. */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NATS_HEALTH, ServingStatus, type HealthReporter } from './grpc.js';
import type { Logger } from './logger.js';

export type { NatsConnection };
export { NATS_HEALTH };

/** A NATS connection with an idempotent, draining `stop`. */
export interface Bus {
  readonly nc: NatsConnection;
  /** True while connected (subscriptions are re-sent by the client on every reconnect). */
  readonly connected: boolean;
  /** Reports the connection as `NATS_HEALTH` on `health` (SERVING while connected), now and on every change. */
  reportTo(health: HealthReporter): void;
  stop(): Promise<void>;
}

/** Credentials for a NATS server that requires them; none for one that does not. */
export interface BusAuth {
  token?: string | undefined;
}

/**
 * How the client reconnects: forever, trying again every `reconnectTimeWait` (plus a little
 * jitter) so a NATS server that comes back is found well within a second. (Pings keep the
 * client's defaults: short ones would drop healthy connections of a busy process.)
 */
export const RECONNECT = { maxReconnectAttempts: -1, reconnectTimeWait: 250, reconnectJitter: 100 } as const;

/** Connects to NATS; waits for the first connection, then reconnects forever. */
export async function connectBus(url: string, name: string, logger: Logger, auth: BusAuth = {}): Promise<Bus> {
  const nc = await connect({
    servers: url.split(','),
    name,
    ...(auth.token ? { token: auth.token } : {}),
    ...RECONNECT,
    waitOnFirstConnect: true,
  });
  let connected = true;
  const reporters = new Set<HealthReporter>();
  const report = () => reporters.forEach((h) => h.set(NATS_HEALTH, connected ? ServingStatus.SERVING : ServingStatus.NOT_SERVING));
  (async () => {
    for await (const s of nc.status()) {
      if (s.type !== 'disconnect' && s.type !== 'reconnect') continue;
      connected = s.type === 'reconnect';
      report();
      logger.info({ nats: s.type }, 'nats connection');
    }
  })().catch(() => {});
  void nc.closed().then(() => {
    connected = false;
    report();
  });
  let stopping: Promise<void> | undefined;
  return {
    nc,
    get connected() {
      return connected;
    },
    reportTo(health) {
      reporters.add(health);
      report();
    },
    stop() {
      stopping ??= nc.isClosed() ? Promise.resolve() : nc.drain().catch(() => nc.close());
      return stopping;
    },
  };
}
