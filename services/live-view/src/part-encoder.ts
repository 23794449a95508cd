/**
 * One ffmpeg child encoding one part of a recording: JPEG frames with their timestamps in on
 * stdin (a live Matroska stream), H.264 (yuv420p) of variable frame rate in MPEG-TS out, so a
 * frame that stays on screen is encoded once, however long it stays. MPEG-TS because a part cut
 * off by a crash stays readable up to its last packet; zerolatency because every frame then
 * reaches the file at once (nothing waits in a lookahead).
 * The child's pid is kept beside the part so a successor process can reap an orphan.
 */
import fs from 'node:fs';
import { childHost, type ChildHost, type HostedChild } from './child-host.js';
import type { Logger } from '../../common/src/logger.js';
import { jpegSize } from './jpeg-size.js';
import { mkvFrameHead, mkvHeader } from './mjpeg-mkv.js';

export interface EncoderSettings {
  ffmpegPath: string;
  fps: number;
  crf: number;
  preset: string;
}

export interface PartEncoderOptions extends EncoderSettings {
  file: string;
  width: number;
  height: number;
  logger: Logger;
  /** Bytes queued for ffmpeg beyond which the encoder counts as backlogged. */
  maxBacklogBytes?: number;
  /** Where ffmpeg runs from (the process's shared host unless a test gives one). */
  host?: ChildHost;
}

export function encoderArgs(o: { fps: number; crf: number; preset: string; width: number; height: number; file: string }): string[] {
  const { width: w, height: h } = o;
  return [
    '-hide_banner', '-loglevel', 'error',
    '-f', 'matroska', '-i', 'pipe:0',
    // Frames of another size (a resized window, another tab) are fitted in, never stretched.
    '-vf', `scale=${w}:${h}:force_original_aspect_ratio=decrease:flags=bilinear,pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2:color=black,format=yuv420p`,
    // Each frame keeps its timestamp: nothing is duplicated to fill a constant rate.
    '-fps_mode', 'passthrough',
    '-c:v', 'libx264', '-preset', o.preset, '-tune', 'zerolatency', '-crf', String(o.crf), '-g', String(o.fps * 2), '-threads', '1', '-pix_fmt', 'yuv420p',
    '-f', 'mpegts', '-muxdelay', '0', '-muxpreload', '0', '-flush_packets', '1', '-y', o.file,
  ];
}

export class PartEncoder {
  readonly file: string;
  readonly #child: HostedChild;
  readonly #o: PartEncoderOptions;
  readonly #exited: Promise<void>;
  #finishing = false;
  #failed = false;
  #framesQueued = 0;

  constructor(o: PartEncoderOptions) {
    this.#o = o;
    this.file = o.file;
    // Started on the child host's thread: the event loop never waits for a fork and exec.
    this.#child = (o.host ?? childHost).spawn(o.ffmpegPath, encoderArgs(o), { stdin: true, pidFile: `${o.file}.pid` });
    this.#exited = this.#child.exited.then(({ code, signal, error, stderr }) => {
      const why = error ? `ffmpeg could not start: ${error}` : code === 0 && this.#finishing ? undefined : `exit ${code ?? signal}: ${stderr.trim().split('\n').slice(-2).join(' | ')}`;
      if (why && !this.#finishing) {
        this.#failed = true;
        o.logger.error({ file: o.file, error: why }, 'ffmpeg stopped unexpectedly; the next frames go to a new part');
      }
    });
  }

  /** Frames handed to ffmpeg so far. */
  get framesQueued(): number {
    return this.#framesQueued;
  }

  get failed(): boolean {
    return this.#failed || this.#child.stdinFailed;
  }

  /** True while ffmpeg is behind by more than the backlog bound. */
  get backlogged(): boolean {
    return this.#child.pendingBytes > (this.#o.maxBacklogBytes ?? 32 * 1024 * 1024);
  }

  /** Queues a JPEG shown from `atMs` after the part's start (until the next one). */
  write(jpeg: Buffer, atMs: number): void {
    if (this.failed || this.#finishing) return;
    // The track says the first frame's size: a mismatch there loses that frame in ffmpeg.
    const head = this.#framesQueued === 0 ? [mkvHeader({ ...(jpegSize(jpeg) ?? this.#o), fps: this.#o.fps })] : [];
    this.#child.write(Buffer.concat([...head, mkvFrameHead(atMs, jpeg.length), jpeg]));
    this.#framesQueued++;
  }

  /** Closes the input and waits for ffmpeg to write the rest; kills it after `timeoutMs`. */
  async finish(timeoutMs: number): Promise<void> {
    if (!this.#finishing) {
      this.#finishing = true;
      this.#child.end();
    }
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), timeoutMs);
    await this.#exited;
    clearTimeout(timer);
  }

  /** Kills ffmpeg at once (what it wrote so far stays readable). Idempotent. */
  async kill(): Promise<void> {
    this.#finishing = true;
    this.#child.kill('SIGKILL');
    await this.#exited;
  }
}

/** Kills ffmpeg children a crashed predecessor left writing parts under `dir`. */
export function reapOrphanEncoders(dir: string, logger: Logger): number {
  let reaped = 0;
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.pid')) {
        const pid = Number(fs.readFileSync(p, 'utf8'));
        try {
          // Only our ffmpeg: the pid may have been reused since.
          const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          if (cmd.includes(p.slice(0, -'.pid'.length))) {
            process.kill(pid, 'SIGKILL');
            reaped++;
          }
        } catch {
          /* gone */
        }
        fs.rmSync(p, { force: true });
      }
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  if (reaped) logger.warn({ reaped }, 'killed encoders left by a previous process');
  return reaped;
}
