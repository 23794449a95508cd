/**
 * A real S3 HTTP server for tests and benchmarks: s3rver in a child process on 127.0.0.1, a
 * free port and a temporary directory, with one bucket. Not a mock: the SDK talks HTTP to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { S3Settings } from '../s3-blob-store.js';

/** s3rver's one account. */
const ACCESS_KEY_ID = 'S3RVER';
const SECRET_ACCESS_KEY = 'S3RVER';

export interface S3Server {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Where s3rver keeps the bucket. */
  dir: string;
  /** Settings of an S3BlobStore on this server, under `prefix`. */
  settings(prefix?: string): S3Settings;
  /** The file-storage service's variables for this server. */
  env(prefix?: string): Record<string, string>;
  /** Stops the server and removes its directory (unless it was given). Idempotent. */
  close(): Promise<void>;
}

function entry(): string[] {
  const self = fileURLToPath(import.meta.url);
  // Run from the sources (tsx) or from dist/ (compiled JavaScript), like this file.
  const script = path.join(path.dirname(self), `s3rver.process${path.extname(self)}`);
  return path.extname(self) === '.ts' ? ['--import', 'tsx', script] : [script];
}

/** Starts s3rver with `bucket` (default `test-bucket`) in `dir` (default a new temporary one). */
export async function startS3Server(options: { bucket?: string; dir?: string } = {}): Promise<S3Server> {
  const bucket = options.bucket ?? 'test-bucket';
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'ats-s3-'));
  const child: ChildProcess = spawn(process.execPath, ['--openssl-legacy-provider', ...entry(), dir, bucket], {
    cwd: path.dirname(fileURLToPath(import.meta.url)),
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const said: string[] = [];
  readline.createInterface({ input: child.stderr! }).on('line', (l) => {
    said.push(l);
    if (said.length > 20) said.shift();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(kill);
    }
    if (!options.dir) fs.rmSync(dir, { recursive: true, force: true });
  };
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      readline.createInterface({ input: child.stdout! }).once('line', (l) => resolve((JSON.parse(l) as { port: number }).port));
      child.once('error', reject);
      void exited.then(() => reject(new Error(`s3rver exited before it listened: ${said.join('\n')}`)));
      setTimeout(() => reject(new Error(`s3rver did not listen within 30 s: ${said.join('\n')}`)), 30_000).unref();
    });
  } catch (err) {
    await close();
    throw err;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const settings = (prefix = ''): S3Settings => ({ bucket, endpoint, region: 'us-east-1', accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY, forcePathStyle: true, prefix });
  return {
    endpoint,
    bucket,
    region: 'us-east-1',
    accessKeyId: ACCESS_KEY_ID,
    secretAccessKey: SECRET_ACCESS_KEY,
    dir,
    settings,
    env: (prefix = '') => ({
      BLOB_STORE: 's3',
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: ACCESS_KEY_ID,
      S3_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY,
      S3_FORCE_PATH_STYLE: 'true',
      ...(prefix ? { S3_PREFIX: prefix } : {}),
    }),
    close,
  };
}
