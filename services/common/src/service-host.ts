/** Serving a gRPC server as a process: listen, report, stop in order on SIGTERM/SIGINT. */
import type { Bus } from './bus.js';
import type { GrpcServer } from './grpc.js';
import type { Logger } from './logger.js';
import { onShutdownSignals, type StopStep } from './shutdown.js';

export interface ServeOptions {
  logger: Logger;
  server: GrpcServer;
  host: string;
  port: number;
  /** Stopped after the server, in this order (workers, then bus, then database). */
  stops: StopStep[];
  shutdownTimeoutMs: number;
  /** The service's NATS connection, reported as the `ats.nats` health entry. */
  bus?: Bus;
}

/** Binds the server, logs the bound address and installs the signal handlers. */
export async function serveGrpc(opts: ServeOptions): Promise<number> {
  const port = await opts.server.listen(opts.host, opts.port);
  opts.bus?.reportTo(opts.server.health);
  // Stop accepting and finish in-flight calls first; leave half the budget to the rest.
  const steps: StopStep[] = [{ name: 'grpc', stop: () => opts.server.stop(Math.floor(opts.shutdownTimeoutMs / 2)) }, ...opts.stops];
  onShutdownSignals(steps, opts.shutdownTimeoutMs, opts.logger);
  opts.logger.info({ host: opts.host, port }, 'listening');
  return port;
}
