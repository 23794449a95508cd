/**
 * A seeded, bounded fuzzer over the gateway's own /openapi.json, against the real stack: for
 * every operation, valid-ish and mutated requests (NUL bytes, overlong strings, wrong types, huge
 * numbers, bad percent-encoding, odd unicode, missing and extra fields, wrong content types,
 * malformed JSON). No request may give a 5xx; every refusal has the documented shape; no response
 * carries the API key. Routes that start work (runs, browsers) get only a few valid requests.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startStackFixture, type StackFixture } from './support/stack-fixture.js';
import { RequestFuzzer, operationsOf, type FuzzRequest, type Operation } from './support/request-fuzzer.js';

const SEED = 0x5eed2026;
const PER_OPERATION = 100;
const CONCURRENCY = 4;
/** Valid requests allowed to routes that start a run or a browser (each is stopped at once). */
const WORK_BUDGET: Record<string, number> = { createRun: 4, createBrowser: 2 };

let f: StackFixture;
before(async () => {
  f = await startStackFixture();
});
after(async () => {
  await f.stop();
});

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

/** Sends a request with node:http, so the target goes out byte for byte (bad escapes included). */
function send(req: FuzzRequest): Promise<Answer> {
  const base = new URL(f.stack.baseUrl);
  return new Promise((resolve, reject) => {
    const r = http.request({ host: base.hostname, port: base.port, method: req.method, path: req.target, headers: req.headers, agent, timeout: 20000 }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if ((size += c.length) <= 1 << 20) chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode!, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    r.on('timeout', () => r.destroy(new Error(`no answer within 20 s: ${req.method} ${req.target.slice(0, 200)}`)));
    r.on('error', reject);
    r.end(req.body);
  });
}

async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await f.api(path, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
  return (await res.json()) as T;
}

/** What is wrong with an answer, if anything: a 5xx, a refusal off the documented shape, a leaked key. */
function problemWith(a: Answer): string | undefined {
  if (a.status >= 500) return `status ${a.status}`;
  if (a.text.includes(f.key)) return 'the API key is in the response';
  if (a.status < 400) return undefined;
  if (!a.contentType.startsWith('application/json')) return `a ${a.status} that is not JSON`;
  let detail: unknown;
  try {
    detail = (JSON.parse(a.text) as { detail?: unknown }).detail;
  } catch {
    return `a ${a.status} whose body is not JSON`;
  }
  if (a.status === 422) {
    const items = Array.isArray(detail) ? detail : [];
    const ok = items.length > 0 && items.every((i: any) => typeof i?.type === 'string' && Array.isArray(i.loc) && typeof i.msg === 'string');
    return ok ? undefined : 'a 422 whose detail is not a list of {type, loc, msg}';
  }
  return typeof detail === 'string' && detail.length > 0 ? undefined : `a ${a.status} without a string detail`;
}

const clip = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);
/** One request as a line: method, target, the headers a fuzzer varies, body. */
const describeRequest = (r: FuzzRequest) => {
  const h = Object.entries(r.headers).filter(([k]) => k !== 'x-service-api-key').map(([k, v]) => `${k}: ${clip(v, 60)}`).join('; ');
  return `${r.method} ${clip(r.target)} [${h}] body=${clip(r.body?.toString() ?? '')}`;
};

test(`when ${PER_OPERATION} fuzzed requests per operation of /openapi.json are sent, then none is a 5xx and every refusal has the documented shape`, async (t) => {
  // Real resources for ids, sessions and cursors.
  const profiles = [await json<{ id: string }>('POST', '/api/v1/browser-profiles', { name: 'fuzz one' }), await json<{ id: string }>('POST', '/api/v1/browser-profiles', { name: 'fuzz two' })];
  const page = await json<{ nextCursor: string | null }>('GET', '/api/v1/browser-profiles?limit=1');
  const ws = await json<{ id: string }>('POST', '/api/v1/agent-workspaces', { name: 'fuzz' });
  const [file] = (await json<{ items: { id: string; upload_url: string }[] }>('POST', '/api/v1/agents/browsercode/files', { files: [{ name: 'in.txt' }] })).items;
  assert.equal((await fetch(file!.upload_url, { method: 'PUT', body: 'hello' })).status, 200);
  const run = await json<{ id: string; sessionId: string }>('POST', '/api/v1/agents/browsercode/runs', { task: 'run `echo hi`', model: 'builtin' });
  await f.api(`/api/v1/agents/browsercode/runs/${run.id}/stop`, { method: 'POST' });
  const browser = await json<{ id: string }>('POST', '/api/v1/browsers', {});

  const doc = await json<{ paths: Record<string, Record<string, any>> }>('GET', '/openapi.json');
  // Stops and deletes last, so the other operations see live resources.
  const destructive = (op: Operation) => op.method === 'DELETE' || op.path.endsWith('/stop');
  const ops = operationsOf(doc).sort((a, b) => Number(destructive(a)) - Number(destructive(b)));
  assert.ok(ops.length >= 25, `the document lists the API's operations (${ops.length})`);

  const fuzzer = new RequestFuzzer(
    SEED,
    {
      pathIds: {
        agent: ['browser-agent', 'browsercode'],
        runId: [run.id, 'run_0000000000000000000000aa'],
        sessionId: [run.sessionId, 'ses_0000000000000000000000aa'],
        browserId: [browser.id, 'brw_0000000000000000000000aa'],
        profileId: [profiles[0]!.id, 'prf_0000000000000000000000aa'],
        workspaceId: [ws.id, 'wsp_0000000000000000000000aa'],
      },
      bodyIds: { session_id: [run.sessionId], profile_id: [profiles[1]!.id], browser_profile_id: [profiles[1]!.id], workspace_id: [ws.id], attached_file_ids: [file!.id], model: ['builtin'] },
      cursors: page.nextCursor ? [page.nextCursor] : [],
    },
    f.key,
  );
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  const budget = { ...WORK_BUDGET };
  const requests: FuzzRequest[] = [];
  for (const op of ops) {
    const valid = op.body && ajv.compile(op.body);
    for (let i = 0; i < PER_OPERATION; i++) {
      const req = fuzzer.next(op);
      // A body the schema accepts may start a run or a browser: past the budget, make it one that is refused.
      if (op.operationId in budget && req.body && valid && safeParse(req.body) !== undefined && valid(safeParse(req.body))) {
        if (budget[op.operationId]! > 0) budget[op.operationId]!--;
        else req.body = Buffer.from(JSON.stringify({ ...(safeParse(req.body) as object), zz_over_budget: true }));
      }
      requests.push(req);
    }
  }

  const problems: string[] = [];
  const statuses = new Map<number, number>();
  const spent = new Map<string, number>();
  const started: { kind: 'run' | 'browser'; path: string }[] = [];
  let next = 0;
  const began = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests.length) {
        const req = requests[next++]!;
        let a: Answer;
        const t0 = Date.now();
        try {
          a = await send(req);
          spent.set(req.operationId, (spent.get(req.operationId) ?? 0) + Date.now() - t0);
        } catch (err) {
          problems.push(`${describeRequest(req)}: no answer (${(err as Error).message})`);
          continue;
        }
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        const p = problemWith(a);
        if (p) problems.push(`${describeRequest(req)} → ${a.status} ${clip(a.text)} (${p})`);
        if (a.status < 300 && req.operationId === 'createRun') started.push({ kind: 'run', path: `${req.target.split('?')[0]}/${JSON.parse(a.text).id}/stop` });
        if (a.status < 300 && req.operationId === 'createBrowser') started.push({ kind: 'browser', path: `/api/v1/browsers/${JSON.parse(a.text).id}/stop` });
      }
    }),
  );
  const seconds = (Date.now() - began) / 1000;
  for (const s of started) await f.api(s.path, { method: 'POST' });
  await f.api(`/api/v1/browsers/${browser.id}/stop`, { method: 'POST' });

  t.diagnostic(`seed ${SEED}: ${requests.length} requests over ${ops.length} operations in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; ${started.filter((x) => x.kind === 'run').length} runs and ${started.filter((x) => x.kind === 'browser').length} browsers started; slowest operations (total ms) ${JSON.stringify([...spent].sort((a, b) => b[1] - a[1]).slice(0, 4))}`);
  assert.deepEqual(problems, [], `${problems.length} of ${requests.length} requests were answered wrongly:\n${problems.slice(0, 60).join('\n')}`);
  assert.ok(started.length <= WORK_BUDGET.createRun! + WORK_BUDGET.createBrowser!, 'the fuzzer stayed within its budget of runs and browsers');
});

/** The body as the gateway's parser reads it (a leading BOM is skipped), or undefined when it is not JSON. */
function safeParse(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString().replace(/^\uFEFF/, ''));
  } catch {
    return undefined;
  }
}
