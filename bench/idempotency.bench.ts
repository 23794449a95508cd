/**
 * What the gateway's database-backed guards cost per request: a run create with a fresh
 * Idempotency-Key (claim row inserted, response stored) and a replay of one, against the same
 * create without the header; and the rate limiter's token-bucket upserts, against the same calls
 * with no limiter. The gateway app runs in this process over real HTTP on its real database
 * (PGlite, and Postgres when one runs) with a run service stub that answers at once, so the
 * differences are the guards' own cost; alternating rounds, medians.
 */
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { Writable } from 'node:stream';
import { openDatabase } from '../services/common/src/db.js';
import { createLogger } from '../services/common/src/logger.js';
import { ApiKeyRepository, migrations } from '../gateway/src/api-key.repository.js';
import { createApp } from '../gateway/src/app.js';
import { ApiKeyAuthenticator } from '../gateway/src/auth.js';
import type { Clients } from '../gateway/src/clients.js';
import { Idempotency } from '../gateway/src/idempotency.js';
import { IdempotencyRepository } from '../gateway/src/idempotency.repository.js';
import { RateLimiter } from '../gateway/src/rate-limit.js';
import { RateLimitRepository } from '../gateway/src/rate-limit.repository.js';
import { drivers, tempDir, testSchema } from '../test/support/infra.js';
import { load, type LoadResult } from './support/load.js';

export interface GuardFigures {
  driver: string;
  concurrency: number;
  /** POST …/runs, no Idempotency-Key, no rate limiter. */
  createBare: LoadResult;
  /** The same with a fresh Idempotency-Key on each request. */
  createKeyed: LoadResult;
  /** The same key and body again: the stored response. */
  createReplay: LoadResult;
  /** POST …/runs, no key, with the rate limiter (two buckets). */
  createLimited: LoadResult;
  /** GET /api-keys without and with the rate limiter (one bucket). */
  readBare: LoadResult;
  readLimited: LoadResult;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function combine(rounds: LoadResult[]): LoadResult {
  return {
    requests: rounds.reduce((a, r) => a + r.requests, 0),
    errors: rounds.reduce((a, r) => a + r.errors, 0),
    seconds: rounds.reduce((a, r) => a + r.seconds, 0),
    rps: median(rounds.map((r) => r.rps)),
    p50Ms: median(rounds.map((r) => r.p50Ms)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
  };
}

const clients = {
  run: { api: { createRun: async () => ({ run: { id: 'run_bench', sessionId: 'ses_bench', workspaceId: '', missingFileIds: [] } }) } },
  fileStorage: { api: {} },
  browserPool: { api: {} },
  liveView: { api: {} },
} as unknown as Clients;

export async function idempotencyBench(opts: { roundMs: number; rounds: number }): Promise<GuardFigures[]> {
  const out: GuardFigures[] = [];
  for (const driver of await drivers()) {
    const dataDir = tempDir('bench-guards');
    const db = await openDatabase({ service: 'gateway', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
    const servers: http.Server[] = [];
    try {
      const repo = new ApiKeyRepository(db.knex);
      const { key } = await repo.create('bench', 'bench');
      const logger = createLogger('gateway', 'warn', new Writable({ write: (_c, _e, done) => done() }));
      const serve = async (limited: boolean) => {
        const app = createApp({
          logger,
          clients,
          auth: new ApiKeyAuthenticator(repo),
          bodyLimitBytes: 1 << 20,
          idempotency: new Idempotency(new IdempotencyRepository(db.knex, { retentionSeconds: 86400, lockSeconds: 60 }), { waitMs: 10000 }),
          // Limits no load here reaches: every request pays for its buckets, none is refused.
          ...(limited ? { rateLimiter: new RateLimiter(new RateLimitRepository(db.knex), { perSecond: 1e5, burst: 1e5, createsPerMinute: 1e5 }) } : {}),
        });
        const server = http.createServer(app);
        servers.push(server);
        await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
        return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/api/v1`;
      };
      const [plain, limited] = [await serve(false), await serve(true)];
      const headers = { 'x-service-api-key': key, 'content-type': 'application/json' };
      const body = JSON.stringify({ task: 'Find the opening hours of the town library' });
      const create = { method: 'POST', body, expect: 202 };
      let n = 0;
      const fresh = () => ({ 'idempotency-key': `bench-${process.pid}-${++n}` });
      const cases = {
        createBare: () => load(`${plain}/agents/browser-agent/runs`, headers, c, opts.roundMs, create),
        createKeyed: () => load(`${plain}/agents/browser-agent/runs`, headers, c, opts.roundMs, { ...create, perRequest: fresh }),
        createReplay: () => load(`${plain}/agents/browser-agent/runs`, { ...headers, 'idempotency-key': 'bench-replay' }, c, opts.roundMs, create),
        createLimited: () => load(`${limited}/agents/browser-agent/runs`, headers, c, opts.roundMs, create),
        readBare: () => load(`${plain}/api-keys`, headers, c, opts.roundMs),
        readLimited: () => load(`${limited}/api-keys`, headers, c, opts.roundMs),
      };
      let c = 4;
      for (const run of Object.values(cases)) await run(); // warm up: JIT, connections, the replay's stored response
      for (const concurrency of [1, 16]) {
        c = concurrency;
        const rounds: Record<string, LoadResult[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
        for (let i = 0; i < opts.rounds; i++) for (const [name, run] of Object.entries(cases)) rounds[name]!.push(await run());
        const f = Object.fromEntries(Object.entries(rounds).map(([k, v]) => [k, combine(v)])) as Omit<GuardFigures, 'driver' | 'concurrency'>;
        out.push({ driver: driver.name, concurrency, ...f });
      }
    } finally {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
      if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
      await db.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  return out;
}
