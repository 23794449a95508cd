/** A closed-loop HTTP load generator: `concurrency` clients on keep-alive sockets for `ms`. */
import http from 'node:http';

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface LoadRequest {
  method?: string;
  body?: string;
  /** The status that counts as success (default 200). */
  expect?: number;
  /** Headers of each request on top of `headers` (e.g. a fresh Idempotency-Key). */
  perRequest?: () => Record<string, string>;
}

export async function load(url: string, headers: Record<string, string>, concurrency: number, ms: number, request: LoadRequest = {}): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const u = new URL(url);
  const latencies: number[] = [];
  let errors = 0;
  const until = Date.now() + ms;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = process.hrtime.bigint();
      const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: request.method ?? 'GET', headers: request.perRequest ? { ...headers, ...request.perRequest() } : headers, agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === (request.expect ?? 200)) latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          else errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(request.body);
    });
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) await one();
    }),
  );
  const seconds = (Date.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, errors, seconds, rps: latencies.length / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
}
