/**
 * Short ffmpeg and ffprobe jobs (probe a part, pull its last frame, join parts into the MP4),
 * each bounded in time. `stop()` kills whatever is still running.
 */
import fs from 'node:fs/promises';
import { childHost, type HostedChild } from './child-host.js';

export interface FfmpegPaths {
  ffmpegPath: string;
  ffprobePath: string;
}

export class FfmpegError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

export class Ffmpeg {
  readonly paths: FfmpegPaths;
  readonly #children = new Set<HostedChild>();
  #stopped = false;

  constructor(paths: FfmpegPaths) {
    this.paths = paths;
  }

  /** Runs a tool to completion (started off the event loop); rejects on a non-zero exit, a timeout or stop(). */
  async run(bin: string, args: string[], timeoutMs: number): Promise<Buffer> {
    if (this.#stopped) throw new FfmpegError('stopped');
    const child = childHost.spawn(bin, args, { stdout: true });
    this.#children.add(child);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    try {
      const { code, signal, error, stderr, stdout } = await child.exited;
      if (error) throw new FfmpegError(`${bin} could not start: ${error}`);
      if (code !== 0) throw new FfmpegError(`${bin} ${signal ? `was killed (${signal})` : `exited with ${code}`}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
      return stdout ?? Buffer.alloc(0);
    } finally {
      clearTimeout(timer);
      this.#children.delete(child);
    }
  }

  /** Video packets (frames) in a file; 0 when it has none or cannot be read. */
  async countFrames(file: string): Promise<number> {
    return (await this.probe(file)).frames;
  }

  /**
   * Video packets (frames) in a file and its container's duration in ms, in one ffprobe run: no
   * frame (`frames` 0) when it has none or cannot be read.
   */
  async probe(file: string): Promise<{ frames: number; durationMs: number }> {
    let out: string;
    try {
      out = (await this.run(this.paths.ffprobePath, ['-v', 'error', '-select_streams', 'v:0', '-count_packets', '-show_entries', 'stream=nb_read_packets:format=duration', '-of', 'default=nw=1', file], 60000)).toString();
    } catch {
      return { frames: 0, durationMs: 0 };
    }
    // A stream can be listed twice (MPEG-TS lists it in its program too): the first count is the stream's.
    const frames = Number.parseInt(/^nb_read_packets=(\d+)$/m.exec(out)?.[1] ?? '', 10);
    const seconds = Number.parseFloat(/^duration=([\d.]+)$/m.exec(out)?.[1] ?? '');
    return { frames: Number.isFinite(frames) ? frames : 0, durationMs: Number.isFinite(seconds) ? Math.round(seconds * 1000) : 0 };
  }

  /** The container's duration in ms. */
  async durationMs(file: string): Promise<number> {
    const out = await this.run(this.paths.ffprobePath, ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file], 30000);
    return Math.round(Number.parseFloat(out.toString().trim()) * 1000);
  }

  /** The last frame of a video as a JPEG; undefined when none can be decoded. */
  async lastFrame(file: string, scratch: string): Promise<Buffer | undefined> {
    try {
      await this.run(this.paths.ffmpegPath, ['-v', 'error', '-y', '-sseof', '-3', '-i', file, '-an', '-update', '1', '-q:v', '3', scratch], 60000);
      return await fs.readFile(scratch);
    } catch {
      return undefined;
    } finally {
      await fs.rm(scratch, { force: true });
    }
  }

  /** Joins parts (same codec and size) into one MP4 with the index up front, without re-encoding. */
  async concat(parts: string[], listFile: string, out: string): Promise<void> {
    const list = parts.map((p) => `file '${p.replace(/'/g, "'\\''")}'`).join('\n') + '\n';
    await fs.writeFile(listFile, list);
    try {
      await this.run(this.paths.ffmpegPath, ['-v', 'error', '-y', '-f', 'concat', '-safe', '0', '-i', listFile, '-map', '0:v:0', '-c', 'copy', '-movflags', '+faststart', '-f', 'mp4', out], 10 * 60000);
    } finally {
      await fs.rm(listFile, { force: true });
    }
  }

  /** Kills every running job. Idempotent. */
  stop(): void {
    this.#stopped = true;
    for (const c of this.#children) c.kill('SIGKILL');
    this.#children.clear();
  }
}
