/**
 * Ordered, bounded graceful shutdown. Steps run in the order given (servers first, then
 * workers, then connections); each gets what is left of the overall budget; a second signal
 * or an exhausted budget exits at once.
 */
import type { Logger } from './logger.js';

/** One resource to stop. */
export interface StopStep {
  name: string;
  stop(): Promise<void> | void;
}

/** Runs the steps in order within `timeoutMs`; resolves true when all finished in time. */
export async function stopAll(steps: StopStep[], timeoutMs: number, logger: Logger): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let clean = true;
  for (const step of steps) {
    const left = deadline - Date.now();
    if (left <= 0) {
      logger.error({ step: step.name }, 'shutdown budget exhausted');
      return false;
    }
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      Promise.resolve()
        .then(() => step.stop())
        .then(
          () => 'ok' as const,
          (err) => {
            logger.error({ step: step.name, err }, 'stop step failed');
            return 'failed' as const;
          },
        ),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), left);
      }),
    ]);
    clearTimeout(timer);
    if (outcome !== 'ok') clean = false;
    if (outcome === 'timeout') {
      logger.error({ step: step.name }, 'stop step timed out');
      return false;
    }
  }
  return clean;
}

/** Stops `steps` on SIGTERM/SIGINT and exits; a second signal exits immediately. */
export function onShutdownSignals(steps: StopStep[], timeoutMs: number, logger: Logger): void {
  let shuttingDown = false;
  const handler = (signal: NodeJS.Signals) => {
    if (shuttingDown) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    shuttingDown = true;
    logger.info({ signal }, 'shutting down');
    stopAll(steps, timeoutMs, logger).then(
      (clean) => {
        logger.info({ clean }, 'stopped');
        logger.flush?.();
        process.exit(clean ? 0 : 1);
      },
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

/**
 * Runs a service's `main`: a configuration or start-up error is printed once, naming the
 * problem, and the process exits non-zero.
 */
export function runMain(service: string, main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${service}: failed to start: ${message}\n`);
    process.exit(err instanceof Error && err.name === 'ConfigError' ? 78 : 1);
  });
}
