/**
 * The gateway's health endpoints: `/healthz` asks every downstream service's gRPC health service,
 * in parallel, with a short deadline, and the services that use NATS whether they are connected to
 * it (`nats`); `/readyz` depends on the gateway alone (see Readiness).
 */
import { NATS_HEALTH, ServingStatus } from '../../services/common/src/grpc.js';
import { SERVICE_NAMES, type Clients } from './clients.js';

export interface HealthReport {
  status: 'ok' | 'degraded';
  services: Record<string, string>;
}

const NAMES: Record<keyof Clients, string> = { run: 'run', browserPool: 'browser-pool', fileStorage: 'file-storage', liveView: 'live-view', webhooks: 'webhooks' };
/** The services connected to NATS (the others do not use it). */
const ON_NATS: (keyof Clients)[] = ['run', 'browserPool', 'liveView'];

export async function checkHealth(clients: Clients, deadlineMs: number): Promise<HealthReport> {
  const [entries, nats] = await Promise.all([
    Promise.all(
      (Object.keys(clients) as (keyof Clients)[]).map(async (k): Promise<[string, string]> => {
        try {
          const st = await clients[k].checkHealth(SERVICE_NAMES[k], deadlineMs);
          return [NAMES[k], st === ServingStatus.SERVING ? 'SERVING' : 'NOT_SERVING'];
        } catch {
          return [NAMES[k], 'UNREACHABLE'];
        }
      }),
    ),
    Promise.all(ON_NATS.map((k) => Promise.resolve().then(() => clients[k].checkHealth(NATS_HEALTH, deadlineMs)).catch(() => undefined))),
  ]);
  // NATS is SERVING when every service that uses it and answers is connected to it (one that does not answer is UNREACHABLE above).
  entries.push(['nats', nats.every((st) => st === undefined || st === ServingStatus.SERVING) ? 'SERVING' : 'NOT_SERVING']);
  const services = Object.fromEntries(entries);
  return { status: entries.every(([, v]) => v === 'SERVING') ? 'ok' : 'degraded', services };
}

/**
 * Whether this gateway takes new requests (`GET /readyz`): from the moment it listens until its
 * shutdown begins. A downstream outage does not make it unready: its routes answer 503 on their own,
 * and taking every gateway out of the load balancer would only turn those 503s into refused connections.
 */
export class Readiness {
  #draining = false;

  get draining(): boolean {
    return this.#draining;
  }

  /** Shutdown has begun: `/readyz` answers 503 so load balancers stop sending new requests. Safe to call twice. */
  drain(): void {
    this.#draining = true;
  }
}
