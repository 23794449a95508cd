/**
 * A minimal live Matroska stream of JPEG frames, each with its own timestamp: what ffmpeg reads
 * on stdin to encode a variable-frame-rate part (image2pipe has no timestamps, so a still screen
 * had to be sent again at the full rate, and encoded again each time). The segment's size is
 * unknown (it is written as it goes); each frame is a cluster of one keyframe block.
 */

/** An EBML variable-length size in 8 bytes (the simplest valid form for any size). */
function size8(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt8(0x01, 0);
  b.writeUIntBE(n, 2, 6);
  return b;
}

const UNKNOWN_SIZE = Buffer.from([0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

function id(hex: number): Buffer {
  const bytes = hex > 0xffffff ? 4 : hex > 0xffff ? 3 : hex > 0xff ? 2 : 1;
  const b = Buffer.alloc(bytes);
  b.writeUIntBE(hex, 0, bytes);
  return b;
}

function el(elementId: number, body: Buffer | Buffer[]): Buffer {
  const data = Array.isArray(body) ? Buffer.concat(body) : body;
  return Buffer.concat([id(elementId), size8(data.length), data]);
}

function uint(elementId: number, v: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUIntBE(v, 0, 6);
  return el(elementId, b);
}

const str = (elementId: number, v: string): Buffer => el(elementId, Buffer.from(v, 'ascii'));

/** EBML header, the open segment, its info (timestamps in ms) and the one MJPEG video track. */
export function mkvHeader(o: { width: number; height: number; fps: number }): Buffer {
  const ebml = el(0x1a45dfa3, [uint(0x4286, 1), uint(0x42f7, 1), uint(0x42f2, 4), uint(0x42f3, 8), str(0x4282, 'matroska'), uint(0x4287, 4), uint(0x4285, 2)]);
  const info = el(0x1549a966, [uint(0x2ad7b1, 1_000_000), str(0x4d80, 'ats-live-view'), str(0x5741, 'ats-live-view')]);
  const video = el(0xe0, [uint(0xb0, o.width), uint(0xba, o.height)]);
  // DefaultDuration: how long the last frame lasts when nothing follows it (one tick).
  const track = el(0xae, [uint(0xd7, 1), uint(0x73c5, 1), uint(0x83, 1), uint(0x9c, 0), uint(0x23e383, Math.round(1e9 / o.fps)), str(0x86, 'V_MJPEG'), video]);
  return Buffer.concat([ebml, id(0x18538067), UNKNOWN_SIZE, info, el(0x1654ae6b, track)]);
}

/** One frame shown from `ms` (since the part's start) as a cluster with one keyframe block: the bytes before the JPEG, to be written followed by it. */
export function mkvFrameHead(ms: number, jpegLength: number): Buffer {
  // SimpleBlock: track 1, timestamp offset 0 in its cluster, keyframe.
  const blockHead = Buffer.from([0x81, 0x00, 0x00, 0x80]);
  const timestamp = uint(0xe7, Math.max(0, Math.round(ms)));
  const blockSize = blockHead.length + jpegLength;
  const block = Buffer.concat([id(0xa3), size8(blockSize), blockHead]);
  const clusterBody = timestamp.length + block.length + jpegLength;
  return Buffer.concat([id(0x1f43b675), size8(clusterBody), timestamp, block]);
}
