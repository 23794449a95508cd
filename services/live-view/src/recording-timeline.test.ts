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

/** A timeline cut into parts of `ticks`, and what each part got. */
function inParts(ticks: number) {
  const parts: [string, number][][] = [[]];
  const write = (jpeg: Buffer, tick: number) => parts.at(-1)!.push([jpeg.toString(), tick]);
  const t = new Timeline(0, 10, undefined, { ticks, cut: () => parts.push([]) });
  return { t, parts, write, lengths: () => parts.map((p) => p.at(-1)![1] + 1 - p[0]![1]) };
}

test('when frames keep coming, then a part ends where the first frame after its length begins the next, and the parts joined last the whole', () => {
  const { t, parts, write, lengths } = inParts(10);
  t.frame(A, 0, write);
  t.frame(B, 250, write); // A on ticks 0..2
  t.frame(C, 1450, write); // B on ticks 3..14: the part is due at 10 but cut where C comes
  t.frame(A, 1600, write); // C on 15
  t.finish(2500, write);
  assert.deepEqual(parts, [
    [['A', 0], ['B', 3], ['B', 14]],
    [['C', 15], ['A', 16], ['A', 24]],
  ]);
  assert.deepEqual(lengths(), [15, 10]);
});

test('when the screen stays still, then a part is cut only at a moment surely past, the last picture opening the next part', () => {
  const { t, parts, write, lengths } = inParts(10);
  t.frame(A, 0, write);
  t.advanceTo(1500, write);
  assert.equal(t.split(800, write), false, 'not yet a part long');
  assert.equal(t.split(1200, write), true);
  assert.equal(t.split(1400, write), false, 'the next part is not long enough yet');
  t.finish(1700, write);
  assert.deepEqual(parts, [[['A', 0], ['A', 10]], [['A', 11], ['A', 16]]], 'the picture opening the next part ends by the moment surely past (tick 11 ends at 1200)');
  assert.deepEqual(lengths(), [11, 6], 'nothing runs past the stop');
});

test('when the screen stays still long after a change, then one part stores the change and no more are cut until the picture changes again', () => {
  const { t, parts, write } = inParts(10);
  t.frame(A, 0, write);
  t.frame(B, 300, write);
  t.advanceTo(6000, write);
  const cuts = [1200, 2400, 3600, 4800, 6000].map((ms) => t.split(ms, write));
  assert.deepEqual(cuts, [true, false, false, false, false], 'one cut stores A and B; the still B after it needs none');
  t.frame(C, 6050, write);
  t.advanceTo(8000, write);
  assert.equal(t.split(8000, write), true, 'a change makes the part worth storing again');
  t.finish(8000, write);
  assert.deepEqual(parts, [[['A', 0], ['B', 3], ['B', 10]], [['B', 11], ['C', 61], ['C', 78]], [['C', 79]]]);
});

test('when a new frame falls on the tick of a still-screen cut, then it opens the next part instead of the last picture', () => {
  const { t, parts, write } = inParts(5);
  t.frame(A, 0, write);
  t.advanceTo(500, write);
  t.frame(B, 450, write); // late: lands on the first tick not final (5)
  assert.equal(t.split(600, write), true);
  t.finish(800, write);
  assert.deepEqual(parts, [[['A', 0], ['A', 4]], [['B', 5], ['B', 7]]]);
});
