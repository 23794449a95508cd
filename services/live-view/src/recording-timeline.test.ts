import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Timeline } from './recording-timeline.js';

const A = Buffer.from('A');
const B = Buffer.from('B');
const C = Buffer.from('C');

/** What the video shows tick by tick (each written frame lasts until the next; the last one tick). */
function recorder() {
  const written: [string, number][] = [];
  return {
    written,
    write: (jpeg: Buffer, tick: number) => written.push([jpeg.toString(), tick]),
    shown: () => written.map(([f, t], i) => f.repeat((written[i + 1]?.[1] ?? t + 1) - t)).join(''),
  };
}

test('when frames come only on change, then each tick shows the newest frame, the video lasts the wall time, and only changes are written', () => {
  const t = new Timeline(1000, 10);
  const r = recorder();
  t.frame(A, 1000, r.write);
  t.frame(B, 1250, r.write); // ticks 0,1,2 (1000, 1100, 1200) show A
  t.frame(C, 1900, r.write); // ticks 3..8 (1300..1800) show B
  t.finish(3000, r.write); // ticks 9..19 show C
  assert.equal(r.shown(), 'AAA' + 'BBBBBB' + 'C'.repeat(11));
  assert.equal(r.shown().length / 10, 2, 'two seconds of video for two seconds of wall time');
  assert.equal(r.written.length, 4, 'three pictures and the closing repeat, not twenty frames');
  assert.equal(t.endMs, 3000);
});

test('when the screen stays still for an hour, then two frames are written', () => {
  const t = new Timeline(0, 10);
  const r = recorder();
  t.frame(A, 0, r.write);
  for (let s = 1; s <= 3600; s++) t.advanceTo(s * 1000, r.write);
  t.finish(3600_000, r.write);
  assert.deepEqual(r.written, [['A', 0], ['A', 35999]]);
});

test('when the first frame comes late, then the start is filled with it; with a seed, with the seed', () => {
  const late = recorder();
  const t = new Timeline(0, 4);
  t.frame(A, 600, late.write);
  t.finish(1000, late.write);
  assert.equal(late.shown(), 'AAAA');

  const seeded = recorder();
  const s = new Timeline(0, 4, C);
  s.frame(A, 600, seeded.write);
  s.finish(1000, seeded.write);
  assert.equal(seeded.shown(), 'CCCA');
});

test('when time advances without frames, then the frame is written once, and a late frame goes to the next tick', () => {
  const t = new Timeline(0, 10);
  const r = recorder();
  t.frame(A, 0, r.write);
  t.advanceTo(450, r.write);
  assert.deepEqual(r.written, [['A', 0]]);
  t.frame(B, 300, r.write); // older than what is final already
  t.finish(700, r.write);
  assert.equal(r.shown(), 'AAAAABB');
});

test('when two frames fall on one tick, then the newer one is shown', () => {
  const t = new Timeline(0, 10);
  const r = recorder();
  t.frame(A, 0, r.write);
  t.frame(B, 210, r.write);
  t.frame(C, 280, r.write);
  t.finish(500, r.write);
  assert.equal(r.shown(), 'AAACC');
});

test('when a browser lives less than a tick, then its video is still one tick long', () => {
  const t = new Timeline(0, 10);
  const r = recorder();
  t.frame(A, 0, r.write);
  t.finish(20, r.write);
  assert.equal(r.shown(), 'A');
});

test('when no frame ever came, then nothing is written', () => {
  const t = new Timeline(0, 10);
  const r = recorder();
  t.advanceTo(5000, r.write);
  t.finish(5000, r.write);
  assert.deepEqual(r.written, []);
  assert.equal(t.hasFrame, false);
});
