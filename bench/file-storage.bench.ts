/**
 * File storage: a 256 MiB file uploaded and downloaded through presigned links with curl against
 * `cp` of the same file on the same disk (both separate processes, alternating, same run); and POST /agents/{agent}/files latency
 * at 32 concurrent clients next to GET /agents (a cheap gRPC-backed route) in the same run.
 * Two more baselines show what curl itself can do here: reading the file from a file:// URL into
 * a file (the download's ceiling) and sending it to an HTTP server that discards it (the upload's);
 * and the download into /dev/null shows the service's side alone.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FileStorageServiceService } from '../gen/ats/filestorage/v1/file_storage.js';
import { createServiceClient } from '../services/common/src/grpc.js';
import { startStackFixture } from '../test/support/stack-fixture.js';
import { load, type LoadResult } from './support/load.js';

export interface FileStorageFigures {
  sizeMiB: number;
  cpMiBps: number;
  uploadMiBps: number;
  downloadMiBps: number;
  uploadVsCp: number;
  downloadVsCp: number;
  addFiles32: LoadResult;
  agents32: LoadResult;
  /** curl file:// → file: curl's own ceiling for a download into a file. */
  curlFileMiBps: number;
  /** curl -T to a server that discards: curl's ceiling for an upload. */
  curlDiscardMiBps: number;
  /** Download into /dev/null: the service's side without the client's file writes. */
  downloadNullMiBps: number;
  downloadVsCurlFile: number;
  uploadVsCurlDiscard: number;
}

/** An HTTP server in its own process that reads and drops every body (curl's upload ceiling). */
async function startDiscardServer(): Promise<{ url: string; stop(): void }> {
  const child = spawn(process.execPath, ['-e', "require('http').createServer((q,s)=>{q.resume();q.on('end',()=>s.end('ok'))}).listen(0,'127.0.0.1',function(){console.log(this.address().port)})"], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve) => child.stdout.once('data', (d: Buffer) => resolve(d.toString().trim())));
  return { url: `http://127.0.0.1:${port}/`, stop: () => child.kill() };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t0 = process.hrtime.bigint();
  return fn().then((v) => [Number(process.hrtime.bigint() - t0) / 1e9, v]);
}

/** curl as the client: a separate process like cp, and what users run. */
function curl(args: string[]): Promise<void> {
  const r = spawnSync('curl', ['-s', '-f', '-o', args.includes('-T') ? '/dev/null' : args[args.length - 1]!, ...args.slice(0, args.includes('-T') ? args.length : -1)]);
  return r.status === 0 ? Promise.resolve() : Promise.reject(new Error(`curl exited ${r.status}: ${r.stderr}`));
}
const putFile = (url: string, file: string) => curl(['-T', file, url.replace('localhost', '127.0.0.1')]);
const getFile = (url: string, to: string) => curl([url.replace('localhost', '127.0.0.1'), to]);

export async function fileStorageBench(opts: { sizeMiB: number; rounds: number; loadMs: number }): Promise<FileStorageFigures> {
  const f = await startStackFixture({ mode: 'dist', projects: ['bench'], env: { LOG_LEVEL: 'warn', FILE_SIZE_LIMIT_BYTES: String((opts.sizeMiB + 1) * 1024 * 1024) } });
  const work = path.join(f.dataDir, 'bench');
  fs.mkdirSync(work);
  const src = path.join(work, 'src.bin');
  const size = opts.sizeMiB * 1024 * 1024;
  spawnSync('head', ['-c', String(size), '/dev/urandom'], { stdio: ['ignore', fs.openSync(src, 'w'), 'inherit'] });
  const { key, projectId } = f.projects.bench!;
  const storage = createServiceClient(FileStorageServiceService, `127.0.0.1:${f.stack.ports.get('file-storage')}`, 5000, f.stack.internalToken);
  try {
    const cp: number[] = [];
    const up: number[] = [];
    const down: number[] = [];
    const curlFile: number[] = [];
    const curlDiscard: number[] = [];
    const downNull: number[] = [];
    const discard = await startDiscardServer();
    for (let i = 0; i < opts.rounds; i++) {
      const viaCurl = path.join(work, `curl-${i}.bin`);
      const [tf] = await timed(() => curl([`file://${src}`, viaCurl]));
      curlFile.push(opts.sizeMiB / tf);
      fs.rmSync(viaCurl);
      const [tdis] = await timed(() => putFile(discard.url, src));
      curlDiscard.push(opts.sizeMiB / tdis);

      const dst = path.join(work, `cp-${i}.bin`);
      const [tc] = await timed(async () => void spawnSync('cp', [src, dst]));
      cp.push(opts.sizeMiB / tc);
      fs.rmSync(dst);

      const res = await f.api('/api/v1/agents/browser-agent/files', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ files: [{ name: `big-${i}.bin` }] }) });
      const [item] = ((await res.json()) as { items: { id: string; upload_url: string }[] }).items;
      const [tu] = await timed(() => putFile(item!.upload_url, src));
      up.push(opts.sizeMiB / tu);

      const { file } = await storage.api.getFile({ projectId, fileId: item!.id });
      const out = path.join(work, `down-${i}.bin`);
      const [td] = await timed(() => getFile(file!.downloadUrl, out));
      down.push(opts.sizeMiB / td);
      if (fs.statSync(out).size !== size) throw new Error('download size mismatch');
      fs.rmSync(out);
      const [tn] = await timed(() => getFile(file!.downloadUrl, '/dev/null'));
      downNull.push(opts.sizeMiB / tn);
    }
    discard.stop();
    const headers = { 'X-Service-API-Key': key, 'Content-Type': 'application/json' };
    const body = JSON.stringify({ files: [{ name: 'a.txt' }] });
    const filesUrl = `${f.stack.baseUrl}/api/v1/agents/browser-agent/files`;
    const agentsUrl = `${f.stack.baseUrl}/api/v1/agents`;
    await load(filesUrl, headers, 8, 1000, { method: 'POST', body, expect: 201 });
    const addFiles32 = await load(filesUrl, headers, 32, opts.loadMs, { method: 'POST', body, expect: 201 });
    const agents32 = await load(agentsUrl, headers, 32, opts.loadMs);
    const cpMiBps = median(cp);
    return {
      sizeMiB: opts.sizeMiB,
      cpMiBps,
      uploadMiBps: median(up),
      downloadMiBps: median(down),
      uploadVsCp: median(up) / cpMiBps,
      downloadVsCp: median(down) / cpMiBps,
      addFiles32,
      agents32,
      curlFileMiBps: median(curlFile),
      curlDiscardMiBps: median(curlDiscard),
      downloadNullMiBps: median(downNull),
      downloadVsCurlFile: median(down) / median(curlFile),
      uploadVsCurlDiscard: median(up) / median(curlDiscard),
    };
  } finally {
    storage.close();
    await f.stop();
  }
}
