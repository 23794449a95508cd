/**
 * Gateway → gRPC → run service round trip (GET /api/v1/agents) against the same route answered
 * inside the gateway, alternating A/B rounds in one run at 1 and 32 concurrent clients.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { ROOT, Stack, canConnect, killGroup } from '../scripts/stack.js';
import { INTERNAL_TOKEN_FILE_NAME } from '../services/common/src/internal-token.js';
import { tempDir } from '../test/support/infra.js';
import { load, type LoadResult } from './support/load.js';

export interface RoundtripFigures {
  concurrency: number;
  grpc: LoadResult;
  local: LoadResult;
  rpsRatio: number;
  p50Ratio: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

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

export async function gatewayRoundtrip(opts: { roundMs: number; rounds: number }): Promise<RoundtripFigures[]> {
  const dataDir = tempDir('bench');
  const stack = new Stack({ dataDir, natsUrl: (await canConnect('127.0.0.1', 4222)) ? 'nats://127.0.0.1:4222' : undefined, apiKey: 'ats_bench_unused_key_000000', mode: 'dist', logLevel: 'warn' });
  await stack.start();
  const pair = spawn(process.execPath, [path.join(ROOT, 'dist/bench/support/gateway-pair.js')], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, DATA_DIR: path.join(dataDir, 'pair'), RUN_SERVICE_ADDR: `127.0.0.1:${stack.ports.get('run')}`, INTERNAL_TOKEN_FILE: path.join(dataDir, INTERNAL_TOKEN_FILE_NAME) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const info = await new Promise<{ grpcPort: number; localPort: number; key: string }>((resolve, reject) => {
      readline.createInterface({ input: pair.stdout! }).once('line', (l) => resolve(JSON.parse(l)));
      pair.once('exit', (code) => reject(new Error(`gateway pair exited ${code}`)));
    });
    const headers = { 'X-Service-API-Key': info.key };
    const a = `http://127.0.0.1:${info.grpcPort}/api/v1/agents`;
    const b = `http://127.0.0.1:${info.localPort}/api/v1/agents`;
    await load(a, headers, 8, 1000); // warm up both paths (JIT, connections)
    await load(b, headers, 8, 1000);
    const out: RoundtripFigures[] = [];
    for (const concurrency of [1, 32]) {
      const ga: LoadResult[] = [];
      const lb: LoadResult[] = [];
      for (let i = 0; i < opts.rounds; i++) {
        ga.push(await load(a, headers, concurrency, opts.roundMs));
        lb.push(await load(b, headers, concurrency, opts.roundMs));
      }
      const grpc = combine(ga);
      const local = combine(lb);
      out.push({ concurrency, grpc, local, rpsRatio: grpc.rps / local.rps, p50Ratio: grpc.p50Ms / local.p50Ms });
    }
    return out;
  } finally {
    killGroup(pair.pid, 'SIGKILL');
    await stack.stop();
  }
}
