import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { KeyEventType, MouseButton, MouseEventType } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { fitEven, jpegSize } from './jpeg-size.js';
import { BadMessage, framePacket, parseClientMessage, readFrameHeader, toDispatchInput } from './viewer-protocol.js';

test('when a viewer sends input, then it becomes the pool request with the same coordinates and keys', () => {
  const down = parseClientMessage('{"t":"mouse","type":"down","x":640.5,"y":400,"button":"right","clicks":2,"mods":8}');
  assert.deepEqual(toDispatchInput('prj_a', 'brw_a', down as Exclude<typeof down, { t: 'ack' }>), {
    projectId: 'prj_a',
    browserId: 'brw_a',
    mouse: { type: MouseEventType.MOUSE_EVENT_TYPE_PRESSED, x: 640.5, y: 400, button: MouseButton.MOUSE_BUTTON_RIGHT, clickCount: 2, modifiers: 8 },
  });
  const key = parseClientMessage('{"t":"key","type":"down","key":"Enter","code":"Enter"}');
  assert.deepEqual(toDispatchInput('p', 'b', key as Exclude<typeof key, { t: 'ack' }>).key, { type: KeyEventType.KEY_EVENT_TYPE_DOWN, key: 'Enter', code: 'Enter', text: '', modifiers: 0 });
  const back = parseClientMessage('{"t":"tab","action":"back"}');
  assert.deepEqual(toDispatchInput('p', 'b', back as Exclude<typeof back, { t: 'ack' }>).tab, { back: true });
  assert.deepEqual(parseClientMessage('{"t":"ack"}'), { t: 'ack' });
});

test('when a message is not what the protocol allows, then it is refused with a reason', () => {
  for (const bad of ['nope', '[]', '{"t":"launch"}', '{"t":"mouse","type":"down","x":"1","y":2}', '{"t":"mouse","type":"down","x":1,"y":1e9}', '{"t":"mouse","type":"drag","x":1,"y":2}', '{"t":"key","type":"down","key":"' + 'k'.repeat(65) + '"}', '{"t":"tab","action":"devtools"}', '{"t":"mouse","type":"down","x":1,"y":2,"mods":99}']) {
    assert.throws(() => parseClientMessage(bad), BadMessage, bad);
  }
});

test('when a frame is packed, then its header carries the size and the CDP time and the JPEG follows untouched', () => {
  const jpeg = Buffer.from([0xff, 0xd8, 1, 2, 3]);
  const h = readFrameHeader(framePacket({ jpeg, width: 1280, height: 800, timestampMs: 1_800_000_000_123.5 }));
  assert.deepEqual({ ...h, jpeg: [...h.jpeg] }, { width: 1280, height: 800, timestampMs: 1_800_000_000_123.5, jpeg: [...jpeg] });
});

test('when a JPEG is read, then its pixel size is found without decoding, and the video size is even and within bounds', () => {
  const out = spawnSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'color=c=red:s=336x210', '-frames:v', '1', '-f', 'image2pipe', '-c:v', 'mjpeg', 'pipe:1']);
  assert.deepEqual(jpegSize(out.stdout), { width: 336, height: 210 });
  assert.equal(jpegSize(Buffer.from('not a jpeg')), undefined);
  assert.deepEqual(fitEven(333, 201, 1280, 1280), { width: 334, height: 202 });
  assert.deepEqual(fitEven(2560, 1600, 1280, 1280), { width: 1280, height: 800 });
  assert.deepEqual(fitEven(1000, 3000, 1280, 1280), { width: 426, height: 1280 });
});
