/** NATS connection (v3 client) that keeps reconnecting and drains on stop. */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';

export type { NatsConnection };

/** A NATS connection with an idempotent, draining `stop`. */
export interface Bus {
  readonly nc: NatsConnection;
  stop(): Promise<void>;
}

/** Credentials for a NATS server that requires them; none for one that does not. */
export interface BusAuth {
  token?: string | undefined;
}

/** Connects to NATS; waits for the first connection, then reconnects forever. */
export async function connectBus(url: string, name: string, logger: Logger, auth: BusAuth = {}): Promise<Bus> {
  const nc = await connect({
    servers: url.split(','),
    name,
    ...(auth.token ? { token: auth.token } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
  });
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') logger.info({ nats: s.type }, 'nats connection');
    }
  })().catch(() => {});
  let stopping: Promise<void> | undefined;
  return {
    nc,
    stop() {
      stopping ??= nc.isClosed() ? Promise.resolve() : nc.drain().catch(() => nc.close());
      return stopping;
    },
  };
}
