/** `/healthz`: asks every downstream service's gRPC health service, in parallel, with a short deadline. */
import { ServingStatus } from '../../services/common/src/grpc.js';
import { SERVICE_NAMES, type Clients } from './clients.js';

export interface HealthReport {
  status: 'ok' | 'degraded';
  services: Record<string, string>;
}

const NAMES: Record<keyof Clients, string> = { run: 'run', browserPool: 'browser-pool', fileStorage: 'file-storage', liveView: 'live-view' };

export async function checkHealth(clients: Clients, deadlineMs: number): Promise<HealthReport> {
  const entries = await Promise.all(
    (Object.keys(clients) as (keyof Clients)[]).map(async (k) => {
      try {
        const st = await clients[k].checkHealth(SERVICE_NAMES[k], deadlineMs);
        return [NAMES[k], st === ServingStatus.SERVING ? 'SERVING' : 'NOT_SERVING'] as const;
      } catch {
        return [NAMES[k], 'UNREACHABLE'] as const;
      }
    }),
  );
  const services = Object.fromEntries(entries);
  return { status: entries.every(([, v]) => v === 'SERVING') ? 'ok' : 'degraded', services };
}
