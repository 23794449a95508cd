/**
 * SHA-256 of uploads computed on a worker thread, so the event loop only moves bytes between the
 * socket and the disk (hashing inline capped an upload at what one core hashes and parses
 * together). Chunks are copied and transferred in order; one worker serves every upload.
 */
import { Worker } from 'node:worker_threads';

const SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const jobs = new Map();
parentPort.on('message', (m) => {
  let h = jobs.get(m.job);
  if (!h) jobs.set(m.job, (h = createHash('sha256')));
  if (m.chunk) return void h.update(m.chunk);
  jobs.delete(m.job);
  if (!m.discard) parentPort.postMessage({ job: m.job, digest: h.digest('hex') });
});
`;

export interface HashJob {
  update(chunk: Buffer): void;
  /** The hex digest of everything updated so far; ends the job. */
  digest(): Promise<string>;
  /** Ends the job without a digest (the upload failed). */
  discard(): void;
}

export class BackgroundHasher {
  #worker: Worker | undefined;
  #next = 0;
  /** Jobs started and not yet digested or discarded: the worker is kept alive only while there are some. */
  #open = 0;
  readonly #waiting = new Map<number, { resolve(d: string): void; reject(e: Error): void }>();

  #ensure(): Worker {
    if (this.#worker) return this.#worker;
    const w = new Worker(SOURCE, { eval: true });
    w.on('message', (m: { job: number; digest: string }) => {
      this.#waiting.get(m.job)?.resolve(m.digest);
      this.#waiting.delete(m.job);
    });
    w.unref();
    const fail = (err: Error) => {
      if (this.#worker === w) this.#worker = undefined;
      for (const p of this.#waiting.values()) p.reject(err);
      this.#waiting.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`hash worker exited (${code})`)));
    this.#worker = w;
    return w;
  }

  #opened(w: Worker): void {
    if (this.#open++ === 0) w.ref();
  }

  #closed(w: Worker): void {
    if (--this.#open === 0) w.unref();
  }

  start(): HashJob {
    const w = this.#ensure();
    const job = this.#next++;
    let ended = false;
    this.#opened(w);
    const end = () => {
      if (ended) return false;
      ended = true;
      this.#closed(w);
      return true;
    };
    return {
      update(chunk) {
        const copy = new Uint8Array(chunk); // the stream still writes `chunk`; send a copy
        w.postMessage({ job, chunk: copy }, [copy.buffer]);
      },
      digest: () => {
        if (this.#worker !== w) {
          end();
          return Promise.reject(new Error('hash worker stopped'));
        }
        return new Promise<string>((resolve, reject) => {
          const settle = () => void end();
          this.#waiting.set(job, {
            resolve: (d) => (settle(), resolve(d)),
            reject: (e) => (settle(), reject(e)),
          });
          w.postMessage({ job });
        });
      },
      discard() {
        if (end()) w.postMessage({ job, discard: true });
      },
    };
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = undefined;
    await w?.terminate();
  }
}
