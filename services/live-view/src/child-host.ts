/**
 * Child processes (ffmpeg, ffprobe) started and fed from a worker thread. Starting a process blocks
 * the thread that starts it until the child has exec'd (fork of this big process, then exec), which
 * on a busy machine takes tens to hundreds of ms: on the event loop, a burst of recordings starting
 * stalled every gRPC answer of live-view for seconds. The worker does the starting and the pipe
 * work; the event loop only posts frames (copied, transferred) and gets the exit back.
 * One worker serves every child; it is kept alive only while children run.
 */
import { spawn as spawnHere } from 'node:child_process';
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';

const SOURCE = `
const { parentPort } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const kids = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'spawn') {
    let child;
    try {
      child = spawn(m.bin, m.args, { stdio: [m.stdin ? 'pipe' : 'ignore', m.stdout ? 'pipe' : 'ignore', 'pipe'] });
    } catch (e) {
      parentPort.postMessage({ id: m.id, op: 'exit', code: null, signal: null, error: String(e && e.message), stderr: '', stdout: null });
      return;
    }
    const k = { child, out: [], err: '' };
    kids.set(m.id, k);
    if (child.pid && m.pidFile) {
      try { fs.writeFileSync(m.pidFile, String(child.pid)); } catch {}
    }
    parentPort.postMessage({ id: m.id, op: 'spawned', pid: child.pid });
    if (child.stdout) child.stdout.on('data', (c) => k.out.push(c));
    child.stderr.on('data', (c) => (k.err = (k.err + c.toString()).slice(-2000)));
    if (child.stdin) child.stdin.on('error', () => parentPort.postMessage({ id: m.id, op: 'stdinError' }));
    let done = false;
    const finish = (msg) => {
      if (done) return;
      done = true;
      kids.delete(m.id);
      if (m.pidFile) fs.rmSync(m.pidFile, { force: true });
      parentPort.postMessage({ id: m.id, op: 'exit', stderr: k.err, stdout: m.stdout ? Buffer.concat(k.out) : null, code: null, signal: null, ...msg });
    };
    child.once('error', (e) => finish({ error: e.message }));
    child.once('close', (code, signal) => finish({ code, signal }));
    return;
  }
  const k = kids.get(m.id);
  if (!k) return;
  if (m.op === 'write') {
    const n = m.chunk.byteLength;
    if (!k.child.stdin || k.child.stdin.destroyed) return parentPort.postMessage({ id: m.id, op: 'written', bytes: n });
    k.child.stdin.write(Buffer.from(m.chunk.buffer, m.chunk.byteOffset, n), () => parentPort.postMessage({ id: m.id, op: 'written', bytes: n }));
  } else if (m.op === 'end') {
    if (k.child.stdin) k.child.stdin.end();
  } else if (m.op === 'destroy') {
    if (k.child.stdin) k.child.stdin.destroy();
  } else if (m.op === 'kill') {
    k.child.kill(m.signal);
  }
});
`;

export interface ChildExit {
  code: number | null;
  signal: string | null;
  /** Set when the process could not be started. */
  error?: string;
  /** The last 2,000 characters of its stderr. */
  stderr: string;
  /** Everything it wrote on stdout (when asked for). */
  stdout: Buffer | null;
}

/** A child run by the host. */
export interface HostedChild {
  /** Its pid once started (undefined when it could not be). */
  readonly started: Promise<number | undefined>;
  readonly exited: Promise<ChildExit>;
  /** Bytes written to its stdin that it has not taken yet. */
  readonly pendingBytes: number;
  /** True once writing its stdin failed (the process is gone). */
  readonly stdinFailed: boolean;
  write(chunk: Buffer): void;
  /** Closes its stdin. */
  end(): void;
  /** Closes its stdin at once, dropping what is pending, and signals it. */
  kill(signal?: NodeJS.Signals): void;
}

export interface SpawnOptions {
  /** A pipe to its stdin (else none). */
  stdin?: boolean;
  /** Collect its stdout (else ignored). */
  stdout?: boolean;
  /** Written with the pid while it runs (removed at its exit): lets a successor reap an orphan. */
  pidFile?: string;
}

interface Entry {
  pending: number;
  stdinFailed: boolean;
  started(pid: number | undefined): void;
  exited(e: ChildExit): void;
}

export class ChildHost {
  #worker: Worker | undefined;
  #next = 0;
  readonly #children = new Map<number, Entry>();

  #ensure(): Worker {
    if (this.#worker) return this.#worker;
    const w = new Worker(SOURCE, { eval: true });
    w.on('message', (m: { id: number; op: string; pid?: number; bytes?: number } & Partial<ChildExit>) => {
      const c = this.#children.get(m.id);
      if (!c) return;
      if (m.op === 'spawned') c.started(m.pid);
      else if (m.op === 'written') c.pending -= m.bytes!;
      else if (m.op === 'stdinError') c.stdinFailed = true;
      else if (m.op === 'exit') {
        this.#children.delete(m.id);
        c.started(undefined);
        c.exited({ code: m.code ?? null, signal: m.signal ?? null, ...(m.error ? { error: m.error } : {}), stderr: m.stderr ?? '', stdout: m.stdout ? Buffer.from(m.stdout) : null });
        if (!this.#children.size) w.unref();
      }
    });
    const fail = (err: Error) => {
      if (this.#worker === w) this.#worker = undefined;
      for (const c of this.#children.values()) {
        c.started(undefined);
        c.exited({ code: null, signal: null, error: `process host stopped: ${err.message}`, stderr: '', stdout: null });
      }
      this.#children.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`exit ${code}`)));
    w.unref();
    this.#worker = w;
    return w;
  }

  /**
   * True: children are started on the event loop as before the host existed (each start blocks
   * it). Only for measuring the host against that baseline (LIVE_VIEW_SPAWN_ON_LOOP).
   */
  onLoop = false;

  /** Starts `bin` with `args` on the host's thread; never blocks the caller's. */
  spawn(bin: string, args: string[], o: SpawnOptions = {}): HostedChild {
    if (this.onLoop) return spawnOnLoop(bin, args, o);
    const w = this.#ensure();
    const id = this.#next++;
    let started!: (pid: number | undefined) => void;
    let exited!: (e: ChildExit) => void;
    const startedP = new Promise<number | undefined>((r) => (started = r));
    const exitedP = new Promise<ChildExit>((r) => (exited = r));
    const entry: Entry = { pending: 0, stdinFailed: false, started, exited };
    this.#children.set(id, entry);
    if (this.#children.size === 1) w.ref();
    w.postMessage({ op: 'spawn', id, bin, args, stdin: !!o.stdin, stdout: !!o.stdout, pidFile: o.pidFile });
    let closed = false;
    const post = (m: object, transfer?: ArrayBuffer[]) => {
      if (this.#worker === w && this.#children.has(id)) w.postMessage({ id, ...m }, transfer);
    };
    return {
      started: startedP,
      exited: exitedP,
      get pendingBytes() {
        return entry.pending;
      },
      get stdinFailed() {
        return entry.stdinFailed;
      },
      write(chunk) {
        if (closed) return;
        const copy = new Uint8Array(chunk); // the caller may reuse its buffer
        entry.pending += copy.byteLength;
        post({ op: 'write', chunk: copy }, [copy.buffer as ArrayBuffer]);
      },
      end() {
        if (closed) return;
        closed = true;
        post({ op: 'end' });
      },
      kill(signal = 'SIGKILL') {
        closed = true;
        post({ op: 'destroy' });
        post({ op: 'kill', signal });
      },
    };
  }

  /** Children running now. */
  get running(): number {
    return this.#children.size;
  }

  /** Stops the worker (kill the children first: a pipe closing ends them only when they read it). */
  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = undefined;
    await w?.terminate();
  }
}

/** The baseline: the same child started on the event loop. */
function spawnOnLoop(bin: string, args: string[], o: SpawnOptions): HostedChild {
  const child = spawnHere(bin, args, { stdio: [o.stdin ? 'pipe' : 'ignore', o.stdout ? 'pipe' : 'ignore', 'pipe'] });
  if (child.pid && o.pidFile) fs.writeFileSync(o.pidFile, String(child.pid));
  let stdinFailed = false;
  const out: Buffer[] = [];
  let err = '';
  child.stdout?.on('data', (c: Buffer) => out.push(c));
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-2000)));
  child.stdin?.on('error', () => (stdinFailed = true));
  const exited = new Promise<ChildExit>((resolve) => {
    let done = false;
    const finish = (e: Partial<ChildExit>) => {
      if (done) return;
      done = true;
      if (o.pidFile) fs.rmSync(o.pidFile, { force: true });
      resolve({ code: null, signal: null, stderr: err, stdout: o.stdout ? Buffer.concat(out) : null, ...e });
    };
    child.once('error', (e) => finish({ error: e.message }));
    child.once('close', (code, signal) => finish({ code, signal }));
  });
  return {
    started: Promise.resolve(child.pid),
    exited,
    get pendingBytes() {
      return child.stdin?.writableLength ?? 0;
    },
    get stdinFailed() {
      return stdinFailed;
    },
    write: (chunk) => void child.stdin?.write(chunk),
    end: () => void child.stdin?.end(),
    kill(signal = 'SIGKILL') {
      child.stdin?.destroy();
      child.kill(signal);
    },
  };
}

/** The host this process's recordings and ffmpeg jobs share. */
export const childHost = new ChildHost();
