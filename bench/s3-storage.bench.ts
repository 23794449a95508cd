/**
 * The S3 blob store: one file uploaded and downloaded through presigned links with curl, on a stack
 * whose file-storage keeps bytes in a local directory and on one that keeps them in S3 (s3rver),
 * alternating, same run; and s3rver's own speed, the AWS SDK straight to it with the store's part
 * size and concurrency (what the S3 stack cannot beat).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { FileStorageServiceService } from '../gen/ats/filestorage/v1/file_storage.js';
import { createServiceClient } from '../services/common/src/grpc.js';
import { createS3Client } from '../services/file-storage/src/s3-blob-store.js';
import { startStackFixture, type StackFixture } from '../test/support/stack-fixture.js';

export interface Throughput {
  uploadMiBps: number;
  downloadMiBps: number;
}

export interface S3StorageFigures {
  sizeMiB: number;
  rounds: number;
  local: Throughput;
  s3: Throughput;
  /** The SDK straight to s3rver, no service in between. */
  rawS3rver: Throughput;
  s3VsLocalUpload: number;
  s3VsLocalDownload: number;
  s3VsRawUpload: number;
  s3VsRawDownload: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function seconds(fn: () => Promise<unknown> | unknown): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

function curl(args: string[]): void {
  const r = spawnSync('curl', ['-s', '-f', ...args]);
  if (r.status !== 0) throw new Error(`curl exited ${r.status}: ${r.stderr}`);
}

/** Seconds to upload `src` through a new upload link, and to download it again into /dev/null. */
async function throughLinks(f: StackFixture, src: string, size: number, name: string): Promise<{ up: number; down: number }> {
  const { key, projectId } = f.projects.bench!;
  const res = await f.api('/api/v1/agents/browser-agent/files', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ files: [{ name }] }) });
  const [item] = ((await res.json()) as { items: { id: string; upload_url: string }[] }).items;
  const up = await seconds(() => curl(['-o', '/dev/null', '-T', src, item!.upload_url.replace('localhost', '127.0.0.1')]));
  const storage = createServiceClient(FileStorageServiceService, `127.0.0.1:${f.stack.ports.get('file-storage')}`, 5000, f.stack.internalToken);
  try {
    const { file } = await storage.api.getFile({ projectId, fileId: item!.id });
    if (Number(file!.sizeBytes) !== size) throw new Error(`stored ${file!.sizeBytes} bytes of ${size}`);
    const down = await seconds(() => curl(['-o', '/dev/null', file!.downloadUrl.replace('localhost', '127.0.0.1')]));
    return { up, down };
  } finally {
    storage.close();
  }
}

export async function s3StorageBench(opts: { sizeMiB: number; rounds: number }): Promise<S3StorageFigures> {
  const size = opts.sizeMiB * 1024 * 1024;
  // No warm browsers: nothing but the file path should use the two cores.
  const env = { LOG_LEVEL: 'warn', FILE_SIZE_LIMIT_BYTES: String(size + 1024 * 1024), POOL_WARM_SIZE: '0' };
  const local = await startStackFixture({ mode: 'dist', projects: ['bench'], env });
  let s3: StackFixture | undefined;
  try {
    s3 = await startStackFixture({ mode: 'dist', projects: ['bench'], env, blobStore: 's3' });
    const server = s3.stack.s3!;
    const client = createS3Client(server.settings());
    const src = path.join(local.dataDir, 'src.bin');
    spawnSync('head', ['-c', String(size), '/dev/urandom'], { stdio: ['ignore', fs.openSync(src, 'w'), 'inherit'] });
    const t = { local: { up: [] as number[], down: [] as number[] }, s3: { up: [] as number[], down: [] as number[] }, raw: { up: [] as number[], down: [] as number[] } };
    try {
      for (let i = 0; i < opts.rounds; i++) {
        for (const [name, f] of [['local', local], ['s3', s3]] as const) {
          const r = await throughLinks(f, src, size, `bench-${i}.bin`);
          t[name].up.push(r.up);
          t[name].down.push(r.down);
        }
        const Key = `raw/bench-${i}.bin`;
        t.raw.up.push(await seconds(() => new Upload({ client, params: { Bucket: server.bucket, Key, Body: fs.createReadStream(src, { highWaterMark: 1 << 20 }) }, partSize: 8 * 1024 * 1024, queueSize: 2 }).done()));
        t.raw.down.push(
          await seconds(async () => {
            const got = await client.send(new GetObjectCommand({ Bucket: server.bucket, Key }));
            let n = 0;
            await pipeline(got.Body as NodeJS.ReadableStream, new Writable({ write: (c: Buffer, _e, cb) => ((n += c.length), cb()) }));
            if (n !== size) throw new Error(`read ${n} bytes of ${size}`);
          }),
        );
      }
    } finally {
      client.destroy();
    }
    const mibps = (xs: number[]) => opts.sizeMiB / median(xs);
    const figures = (x: { up: number[]; down: number[] }): Throughput => ({ uploadMiBps: mibps(x.up), downloadMiBps: mibps(x.down) });
    const [l, s, r] = [figures(t.local), figures(t.s3), figures(t.raw)];
    return {
      sizeMiB: opts.sizeMiB,
      rounds: opts.rounds,
      local: l,
      s3: s,
      rawS3rver: r,
      s3VsLocalUpload: s.uploadMiBps / l.uploadMiBps,
      s3VsLocalDownload: s.downloadMiBps / l.downloadMiBps,
      s3VsRawUpload: s.uploadMiBps / r.uploadMiBps,
      s3VsRawDownload: s.downloadMiBps / r.downloadMiBps,
    };
  } finally {
    await s3?.stop();
    await local.stop();
  }
}
