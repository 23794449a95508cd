import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Timeline } from './recording-timeline.js';

const A = Buffer.from('A');
const B = Buffer.from('B');
const C = Buffer.from('C');

function recorder() {
  const out: string[] = [];
  return { out, write: (jpeg: Buffer, count: number) => out.push(...Array<string>(count).fill(jpeg.toString())) };
}

test('when frames come only on change, then each tick shows the newest frame and the video lasts the wall time', () => {
  const t = new Timeline(1000, 10);
  const { out, write } = recorder();
  t.frame(A, 1000, write);
  t.frame(B, 1250, write); // ticks 0,1,2 (1000, 1100, 1200) showed A
  t.frame(C, 1900, write); // ticks 3..8 (1300..1800) showed B
  t.finish(3000, write); // ticks 9..19 show C
  assert.equal(out.join(''), 'AAA' + 'BBBBBB' + 'C'.repeat(11));
  assert.equal(out.length / 10, 2, 'two seconds of video for two seconds of wall time');
  assert.equal(t.endMs, 3000);
});

test('when the first frame comes late, then the start is filled with it; with a seed, with the seed', () => {
  const late = recorder();
  const t = new Timeline(0, 4);
  t.frame(A, 600, late.write);
  t.finish(1000, late.write);
  assert.equal(late.out.join(''), 'AAAA');

  const seeded = recorder();
  const s = new Timeline(0, 4, C);
  s.frame(A, 600, seeded.write);
  s.finish(1000, seeded.write);
  assert.equal(seeded.out.join(''), 'CCCA');
});

test('when time advances without frames, then the last frame is repeated up to then, and a late frame goes to the next tick', () => {
  const t = new Timeline(0, 10);
  const { out, write } = recorder();
  t.frame(A, 0, write);
  t.advanceTo(450, write);
  assert.equal(out.join(''), 'AAAAA');
  t.frame(B, 300, write); // older than what is written already
  t.finish(700, write);
  assert.equal(out.join(''), 'AAAAABB');
});

test('when no frame ever came, then nothing is written', () => {
  const t = new Timeline(0, 10);
  const { out, write } = recorder();
  t.advanceTo(5000, write);
  t.finish(5000, write);
  assert.deepEqual(out, []);
  assert.equal(t.hasFrame, false);
});
