/** Composition root of the run service: config → database → bus → clients → runs, workers → gRPC → signals. */
import os from 'node:os';
import path from 'node:path';
import { connectBus } from '../../common/src/bus.js';
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { serveGrpc } from '../../common/src/service-host.js';
import { runMain } from '../../common/src/shutdown.js';
import { createModelRegistry } from './agents/models.js';
import { canSandbox, prepareWorkDir, shellUser } from './agents/shell.js';
import { closeRunClients, createRunClients } from './clients.js';
import { loadRunConfig } from './config.js';
import { RunEvents } from './run-events.js';
import { RunRepository, migrations } from './run.repository.js';
import { RunWorker } from './run-worker.js';
import { Runs } from './runs.js';
import { RunScheduler } from './scheduler.js';
import { createRunServer } from './server.js';

runMain('run', async () => {
  const config = loadRunConfig();
  const logger = createLogger('run', config.logLevel);
  const token = loadInternalToken(config);
  const db = await openDatabase({ service: 'run', dataDir: config.dataDir, databaseUrl: config.databaseUrl, migrations, logger });
  const bus = await connectBus(config.natsUrl, 'run', logger, { token: config.natsToken });
  const repo = new RunRepository(db.knex);
  const events = new RunEvents(repo, bus.nc, logger);
  const clients = createRunClients(config, token);
  const models = createModelRegistry({
    openaiBaseUrl: config.openaiBaseUrl,
    openaiApiKey: config.openaiApiKey,
    openaiModels: config.openaiModels,
    anthropicApiKey: config.anthropicApiKey,
    anthropicBaseUrl: config.anthropicBaseUrl,
    anthropicModels: config.anthropicModels,
    defaultModel: config.defaultModel,
    prices: config.prices,
    timeoutMs: config.modelTimeoutMs,
    maxRetries: config.modelMaxRetries,
  });
  const sandbox = config.shellSandbox === 'off' ? undefined : { network: config.shellNetwork === 'host' };
  const sandboxWorks = !sandbox || canSandbox(shellUser(), sandbox);
  if (!sandboxWorks) logger.warn('browsercode commands cannot be sandboxed here (unshare is refused), so they are refused; allow user namespaces (or run as root), or set SHELL_SANDBOX=off to run them unsandboxed');
  else if (!sandbox) logger.warn('SHELL_SANDBOX=off: browsercode commands run without namespaces and can see this service’s processes');
  const runs = new Runs({ repo, events, clients, models, nc: bus.nc, logger });
  const browserStops = runs.closeSessionsOnBrowserStop();
  const worker = new RunWorker({
    repo,
    events,
    clients,
    models,
    runs,
    logger,
    workDir: await prepareWorkDir(config.workDir ?? path.join(os.tmpdir(), 'ats-run-work'), config.dataDir),
    limits: { maxSteps: config.maxSteps, maxRunMs: config.maxRunMinutes * 60000, actionTimeoutMs: config.actionTimeoutMs },
    terminal: {
      limits: { timeoutMs: config.shellTimeoutMs, maxOutputBytes: config.shellMaxOutputBytes },
      user: shellUser(),
      sandbox: sandbox && !sandboxWorks ? 'unavailable' : sandbox,
    },
    price: (model, usage) => models.price(model, usage),
  });
  const scheduler = new RunScheduler({
    repo,
    events,
    clients,
    nc: bus.nc,
    logger,
    execute: (run, signal) => worker.execute(run, signal),
    concurrency: config.concurrency,
    leaseMs: config.leaseMs,
    maxRunningPerProject: config.maxRunningPerProject,
    pollMs: config.pollMs,
  });
  await serveGrpc({
    logger,
    server: createRunServer({ logger, runs, token }),
    host: config.grpcHost,
    port: config.grpcPort,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stops: [
      { name: 'scheduler', stop: () => scheduler.stop(Math.floor(config.shutdownTimeoutMs / 4)) },
      { name: 'browser-stops', stop: () => browserStops.unsubscribe() },
      { name: 'grpc-clients', stop: () => closeRunClients(clients) },
      { name: 'nats', stop: () => bus.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
  });
  scheduler.start();
});
