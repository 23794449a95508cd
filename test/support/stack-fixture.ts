/** Starts the real stack (every service its own process, real gRPC on loopback) for a test file. */
import fs from 'node:fs';
import { canConnect, Stack, type ProcessName, type StackOptions } from '../../scripts/stack.js';
import { ApiKeyRepository, migrations as gatewayMigrations } from '../../gateway/src/api-key.repository.js';
import { openDatabase } from '../../services/common/src/db.js';
import { tempDir } from './infra.js';
import { DocumentedReplies } from './openapi-replies.js';

/** A project with its own API key (registered before the stack starts). */
export interface TestProject {
  key: string;
  projectId: string;
}

export interface StackFixture {
  stack: Stack;
  key: string;
  projects: Record<string, TestProject>;
  dataDir: string;
  /**
   * fetch against the gateway with the key (unless headers override it). Every reply to a
   * documented route must match /openapi.json (status and JSON body), or the call throws.
   */
  api(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  /** The last lines each process printed (for failure messages). */
  logs(service?: ProcessName): string;
  stop(): Promise<void>;
}

/**
 * How test stacks run the services: `dist` (the compiled code `make up` and the image run) under
 * `make test`, which builds first and sets ATS_STACK_MODE; else `tsx` from the sources, so a test
 * file run alone never runs stale code. A service from dist/ starts on less than half the CPU.
 */
export function stackMode(): 'tsx' | 'dist' {
  return process.env.ATS_STACK_MODE === 'dist' ? 'dist' : 'tsx';
}

/**
 * Environment for a stack whose file is not about recordings: recording (on by default) is off.
 * The recording, live-view, webhooks, dashboard and client files keep it on; in the run files it
 * was a quarter of the CPU (test/runs.test.ts: 70 → 51 CPU-s, ffmpeg and ffprobe most of it).
 */
export const NOT_RECORDED = { RECORDING_ENABLED: 'false' } as const;

export interface StackFixtureOptions {
  /** Extra environment for every service. */
  env?: Record<string, string>;
  /** Projects to create, each with its own key. */
  projects?: string[];
  /** `tsx` (sources) or `dist` (built code); default `stackMode()`. */
  mode?: 'tsx' | 'dist';
  /** A service's budget for a graceful stop (SHUTDOWN_TIMEOUT_MS; default 5 s). */
  shutdownTimeoutMs?: number;
  /** Start the stack's own nats-server (which requires a token) even when 127.0.0.1:4222 answers. */
  ownNats?: boolean;
  /** Postgres for every service (each in its own schema); the embedded database (a PGlite in the data directory) when unset. */
  databaseUrl?: string;
  /** Without `databaseUrl`: one PGlite for the stack (`shared`, the default) or one per service (see StackOptions.embeddedDatabase). */
  embeddedDatabase?: 'shared' | 'per-service';
  /** Processes per service, one count for all or per service (see StackOptions.replicas; needs `databaseUrl`). */
  replicas?: StackOptions['replicas'];
  /** The services' log level (default info). */
  logLevel?: string;
  /** file-storage's bytes: in the data directory (default) or in a bucket on an s3rver the stack starts. */
  blobStore?: 'local' | 's3';
  /** How clients reach the replicas of another service (see StackOptions.balancing). */
  balancing?: 'per-call' | 'pinned';
  /** Services with the stack's V8 heap limits (default true; see StackOptions.heapLimits). */
  heapLimits?: boolean;
}

export async function startStackFixture(options: StackFixtureOptions = {}): Promise<StackFixture> {
  const { env = {}, projects: projectNames = [], mode = stackMode(), ownNats = false, databaseUrl, embeddedDatabase, replicas, logLevel = 'info', blobStore, balancing, heapLimits, shutdownTimeoutMs = 5000 } = options;
  const dataDir = tempDir('stack');
  const projects: Record<string, TestProject> = {};
  // Keys registered in the stack's database before the gateway starts.
  const registerProjects = async (s: Stack) => {
    if (!projectNames.length) return;
    const db = await openDatabase({ service: 'gateway', dataDir, databaseUrl: s.databaseUrl, migrations: gatewayMigrations });
    const repo = new ApiKeyRepository(db.knex);
    for (const name of projectNames) {
      const { key, info } = await repo.create(name, 'test');
      projects[name] = { key, projectId: info.projectId };
    }
    await db.stop();
  };
  const key = `ats_test_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const lines: [string, string][] = [];
  const natsUrl = !ownNats && (await canConnect('127.0.0.1', 4222)) ? 'nats://127.0.0.1:4222' : undefined;
  const stack = new Stack({
    dataDir,
    natsUrl,
    databaseUrl,
    embeddedDatabase,
    beforeServices: registerProjects,
    replicas,
    balancing,
    heapLimits,
    apiKey: key,
    mode,
    logLevel,
    shutdownTimeoutMs,
    // Tests fire requests far faster than a client should: limits this high only stop a runaway loop.
    env: { RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '2000', RATE_LIMIT_CREATES_PER_MINUTE: '6000', ...env },
    blobStore,
    onLine: (service, line) => {
      // ATS_STACK_LOG=<file>: every service line of every stack a test starts, to read after a failure.
      if (process.env.ATS_STACK_LOG) fs.appendFileSync(process.env.ATS_STACK_LOG, `${service} | ${line}\n`);
      lines.push([service, line]);
      if (lines.length > 2000) lines.shift();
    },
  });
  let replies: DocumentedReplies;
  try {
    await stack.start();
    replies = await DocumentedReplies.load(stack.baseUrl);
  } catch (err) {
    await stack.stop().catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
    // What the services said before the start failed is the only clue to why.
    const said = lines.slice(-40).map(([s, l]) => `${s} | ${l}`).join('\n');
    throw new Error(`${(err as Error).message}\n${said}`, { cause: err });
  }
  return {
    stack,
    key,
    projects,
    dataDir,
    async api(path, init = {}) {
      const headers = new Headers(init.headers);
      if (init.key !== null && !headers.has('x-service-api-key')) headers.set('x-service-api-key', init.key ?? key);
      const res = await fetch(`${stack.baseUrl}${path}`, { ...init, headers });
      await replies.check(init.method ?? 'GET', path, res);
      return res;
    },
    logs(service) {
      return lines.filter(([s]) => !service || s === service).map(([s, l]) => `${s} | ${l}`).join('\n');
    },
    async stop() {
      await stack.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** True while a process with this pid exists. */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
