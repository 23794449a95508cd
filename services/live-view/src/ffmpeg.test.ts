/** The short ffmpeg jobs on real files: what a probe reads of a part. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { Ffmpeg } from './ffmpeg.js';

const ffmpeg = new Ffmpeg({ ffmpegPath: 'ffmpeg', ffprobePath: 'ffprobe' });

test('when a part is probed, then one run gives its frames and its length; an empty or unreadable file has no frame', async () => {
  const dir = tempDir('ffmpeg-probe');
  const part = path.join(dir, 'part.ts');
  // 2 s at 10 frames/s, as MPEG-TS like the recorder's parts.
  await ffmpeg.run('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=10', '-t', '2', '-f', 'mpegts', part], 30_000);
  assert.deepEqual(await ffmpeg.probe(part), { frames: 20, durationMs: 2000 });
  assert.equal(await ffmpeg.countFrames(part), 20, 'the same count as the frame count alone');

  const empty = path.join(dir, 'empty.ts');
  fs.writeFileSync(empty, '');
  assert.deepEqual(await ffmpeg.probe(empty), { frames: 0, durationMs: 0 });
  const junk = path.join(dir, 'junk.ts');
  fs.writeFileSync(junk, 'not a video');
  assert.equal((await ffmpeg.probe(junk)).frames, 0);
});
