/** Composition root of the run service: config → database → bus → clients → runs, workers → gRPC → signals. */
import os from 'node:os';
import path from 'node:path';
import { connectBus } from '../../common/src/bus.js';
import { openDatabase } from '../../common/src/db.js';
import { loadInternalToken } from '../../common/src/internal-token.js';
import { createLogger } from '../../common/src/logger.js';
import { serveGrpc } from '../../common/src/service-host.js';
import { runMain } from '../../common/src/shutdown.js';
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { runResource } from '../../common/src/resources.js';
import { startWebhookRelay } from '../../webhooks/src/client/outbox-sink.js';
import { createModelRegistry } from './agents/models.js';
import { deniedCalls, seccompFilter } from './agents/seccomp.js';
import { canSandbox, prepareWorkDir, shellUser, SHOWN_TREES, type Sandbox, type ShellCaps } from './agents/shell.js';
import { ShellTenancy } from './agents/shell-tenancy.js';
import { BrowserCapacity } from './browser-capacity.js';
import { closeRunClients, createRunClients } from './clients.js';
import { withPoolRetries } from './pool-retry.js';
import { loadRunConfig } from './config.js';
import { RunEvents } from './run-events.js';
import { RunRepository, migrations } from './run.repository.js';
import { runOut } from './run.handlers.js';
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
  const repo = new RunRepository(db.knex, {
    onChange: (trx, run, change) => recordOutboxEvent(trx, { projectId: run.projectId, type: change, orderingKey: run.id, data: runResource(runOut(run)) }),
  });
  const relay = startWebhookRelay({ service: 'run', knex: db.knex, driver: db.driver, webhooksAddr: config.webhooksAddr, outboxPollMs: config.outboxPollMs, grpcDeadlineMs: config.grpcDeadlineMs, token, logger });
  const events = new RunEvents(repo, bus.nc, logger);
  const clients = createRunClients(config, token);
  const models = createModelRegistry({
    openaiBaseUrl: config.openaiBaseUrl,
    openaiApiKey: config.openaiApiKey,
    openaiModels: config.openaiModels,
    anthropicApiKey: config.anthropicApiKey,
    anthropicBaseUrl: config.anthropicBaseUrl,
    anthropicModels: config.anthropicModels,
    visionModels: config.visionModels,
    defaultModel: config.defaultModel,
    prices: config.prices,
    timeoutMs: config.modelTimeoutMs,
    maxRetries: config.modelMaxRetries,
  });
  const workDir = await prepareWorkDir(config.workDir ?? path.join(os.tmpdir(), 'ats-run-work'), config.dataDir);
  const caps: ShellCaps = {
    maxProcesses: config.shellMaxProcesses,
    maxMemoryMb: config.shellMaxMemoryMb,
    maxCpuPercent: config.shellMaxCpuPercent,
    maxDiskMb: config.shellMaxDiskMb,
    tmpMb: config.shellTmpMb,
  };
  const tenancy = await ShellTenancy.open({ workDir, uidBase: config.shellUidBase, uidCount: config.shellUidCount, caps, cgroups: config.shellCgroups, logger });
  // Before any run starts here: what earlier processes of this service left (commands, cgroups, work folders) goes.
  await tenancy.reap(async (id) => {
    const run = await repo.run(id.replace(/\.takeover-\d+$/, '')); // a run taken over works in <id>.takeover-<n>
    return !run ? 'unknown' : run.status === 'running' || run.status === 'queued' ? 'running' : 'ended';
  });
  // The service's data, every run's disk and the directories listed are covered in each command.
  const hide = [config.dataDir, workDir, ...config.shellHidePaths];
  const sandbox: Sandbox | undefined = config.shellSandbox === 'off' ? undefined : { network: config.shellNetwork === 'host', hide };
  let sandboxWorks = !sandbox || (await canSandbox(shellUser(), sandbox));
  if (sandbox && !sandboxWorks) {
    // A kernel or container that refuses seccomp filters: the rest of the sandbox still holds.
    sandbox.seccomp = false;
    sandboxWorks = await canSandbox(shellUser(), sandbox);
    if (sandboxWorks) logger.warn('browsercode commands run without a seccomp filter here (loading one is refused); namespaces, the chroot, no_new_privs and the dropped capabilities still confine them');
  }
  if (!sandboxWorks) logger.warn('browsercode commands cannot be sandboxed here (unshare or mount is refused), so they are refused; allow user namespaces (or run as root), or set SHELL_SANDBOX=off to run them unsandboxed');
  else if (!sandbox) logger.warn('SHELL_SANDBOX=off: browsercode commands run without namespaces, as this service’s user or nobody, with no private /tmp and with host sockets visible');
  else {
    logger.info(
      {
        ...tenancy.describe(),
        network: sandbox.network ? 'host (abstract Unix sockets of the host are reachable)' : 'none',
        root: `a chroot of ${SHOWN_TREES.join(', ')} (read-only), the run's disk, private /tmp, /var/tmp and /dev/shm, a /dev of null, zero, full, random, urandom and tty, and /proc of its own PIDs`,
        seccomp: sandbox.seccomp === false ? 'off (refused here)' : seccompFilter() ? `refuses ${deniedCalls().join(', ')}` : `none for ${process.arch}`,
        noNewPrivs: true,
      },
      'browsercode terminal confinement',
    );
  }
  const runs = new Runs({ repo, events, clients, models, nc: bus.nc, logger });
  // A run outlives a restart of the pool (it waits for it), within a bound.
  const workerClients = withPoolRetries(clients, { budgetMs: config.browserPoolRetryMs, logger });
  const capacity = new BrowserCapacity({ repo, events, clients: workerClients, nc: bus.nc, logger });
  // A browser that stops closes its sessions and frees a slot a waiting run may take.
  const browserStops = runs.closeSessionsOnBrowserStop((projectId) => void capacity.slotMayBeFree(projectId));
  const worker = new RunWorker({
    repo,
    events,
    models,
    runs,
    capacity,
    logger,
    clients: workerClients,
    workDir,
    tenancy,
    limits: { maxSteps: config.maxSteps, maxModelFailures: config.maxModelFailures, maxRunMs: config.maxRunMinutes * 60000, actionTimeoutMs: config.actionTimeoutMs, stopGraceMs: config.stopGraceMs, maxOutputFiles: config.maxOutputFiles },
    terminal: {
      limits: { timeoutMs: config.shellTimeoutMs, maxOutputBytes: config.shellMaxOutputBytes },
      user: shellUser(),
      sandbox: sandbox && !sandboxWorks ? 'unavailable' : sandbox,
      caps,
    },
    price: (model, usage) => models.price(model, usage),
  });
  const scheduler = new RunScheduler({
    repo,
    events,
    clients,
    nc: bus.nc,
    logger,
    execute: (run, signal, takeover) => worker.execute(run, signal, takeover),
    concurrency: config.concurrency,
    stopGraceMs: config.stopGraceMs,
    leaseMs: config.leaseMs,
    maxTakeovers: config.maxTakeovers,
    instanceId: config.instanceId,
    maxRunningPerProject: config.maxRunningPerProject,
    pollMs: config.pollMs,
  });
  await serveGrpc({
    bus,
    logger,
    server: createRunServer({ logger, runs, token }),
    host: config.grpcHost,
    port: config.grpcPort,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    stops: [
      { name: 'scheduler', stop: () => scheduler.stop(Math.floor(config.shutdownTimeoutMs / 4)) },
      { name: 'browser-stops', stop: () => browserStops.unsubscribe() },
      { name: 'grpc-clients', stop: () => closeRunClients(clients) },
      { name: 'webhook-relay', stop: () => relay.stop() },
      { name: 'nats', stop: () => bus.stop() },
      { name: 'database', stop: () => db.stop() },
    ],
  });
  scheduler.start();
});
