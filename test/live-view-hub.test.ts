/**
 * The live view edge in-process over real HTTP and WebSockets, fed by a stand-in browser pool
 * on real gRPC: one frame stream per browser whatever the number of viewers, slow viewers skip
 * frames without holding up the others, view-only links cannot send input, and a link's expiry
 * or the browser's end close the socket with the reason.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, beforeEach, describe, test } from 'node:test';
import WebSocket from 'ws';
import { MouseButton, MouseEventType } from '../gen/ats/browserpool/v1/browser_pool.js';
import { createLogger } from '../services/common/src/logger.js';
import { Signer } from '../services/common/src/signing.js';
import { createLiveViewHttp, type LiveViewHttp } from '../services/live-view/src/live-view.http.js';
import { mintLiveViewToken, type LiveViewMode } from '../services/live-view/src/live-view-token.js';
import { loadPageAssets } from '../services/live-view/src/page-assets.js';
import { createPoolClient, type FrameSource } from '../services/live-view/src/pool-client.js';
import { FakePool } from '../services/live-view/src/pool.fake.js';
import { ViewerHub } from '../services/live-view/src/viewer-hub.js';
import { CloseCode, readFrameHeader } from '../services/live-view/src/viewer-protocol.js';
import { until } from './support/until.js';

const PROJECT = 'prj_hub';
const BROWSER = 'brw_hub';
const logger = createLogger('test', process.env.TEST_LOG ?? 'silent');

/** A viewer written in Node: speaks the page's protocol; acks each frame unless told not to. */
class TestViewer {
  readonly ws: WebSocket;
  readonly frames: number[] = [];
  readonly messages: Record<string, any>[] = [];
  closed: Promise<[number, string]>;
  ack = true;

  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.closed = once(this.ws, 'close').then(([code, reason]) => [code as number, String(reason)]);
    this.ws.on('message', (data: Buffer, binary) => {
      if (!binary) return void this.messages.push(JSON.parse(data.toString()));
      this.frames.push(Number(readFrameHeader(data).jpeg.toString().slice('jpeg-'.length)));
      if (this.ack) this.ws.send('{"t":"ack"}');
    });
  }

  opened(): Promise<unknown> {
    return this.ws.readyState === WebSocket.OPEN ? Promise.resolve() : once(this.ws, 'open');
  }

  message(t: string): Promise<Record<string, any>> {
    return soon(() => this.messages.find((m) => m.t === t));
  }

  send(m: unknown): void {
    this.ws.send(JSON.stringify(m));
  }
}

/** Frames arrive as events on this event loop: a short look, often. */
const soon = <T>(check: () => T | undefined | false) => until(check, { timeoutMs: 5000, intervalMs: 5 });

let pool: FakePool;
let source: FrameSource;
let edge: LiveViewHttp;
let base: string;
let signer: Signer;
let clockLagMs = 0;

before(async () => {
  pool = new FakePool(PROJECT, BROWSER, logger);
  const port = await pool.server.listen('127.0.0.1', 0);
  source = createPoolClient(`127.0.0.1:${port}`, 5000, pool.token);
  signer = new Signer('hub-test-secret-0123456789-abcdefghij', () => Date.now() - clockLagMs);
  edge = createLiveViewHttp({
    signer,
    hub: new ViewerHub({ source, logger, lingerMs: 0, maxViewersPerBrowser: 8 }),
    source,
    assets: loadPageAssets(),
    logger,
    frameAncestors: '*',
    maxUnacked: 2,
    maxFps: 1000,
  });
  await new Promise<void>((r) => edge.server.listen(0, '127.0.0.1', r));
  base = `ws://127.0.0.1:${(edge.server.address() as { port: number }).port}`;
});
after(async () => {
  await edge.stop();
  source.close();
  await pool.server.stop(100);
});
beforeEach(() => {
  pool.reset();
  clockLagMs = 0;
});

/** Frame n: its JPEG bytes say which it is. */
const push = (n: number) => pool.push({ jpeg: Buffer.from(`jpeg-${n}`), tabs: [{ id: 't1', url: 'https://example.com/', title: 'Example', active: true }] });

function socketUrl(mode: LiveViewMode = 'interactive', ttl = 600, browserId = BROWSER): string {
  return `${base}/browsers/${browserId}/ws?token=${mintLiveViewToken(signer, PROJECT, BROWSER, mode, ttl).token}`;
}

async function viewers(n: number, mode: LiveViewMode = 'interactive'): Promise<TestViewer[]> {
  const vs = Array.from({ length: n }, () => new TestViewer(socketUrl(mode)));
  await Promise.all(vs.map((v) => v.message('hello')));
  return vs;
}

async function closeAll(vs: TestViewer[]): Promise<void> {
  for (const v of vs) v.ws.close();
  await Promise.all(vs.map((v) => v.closed));
  await soon(() => pool.openStreams.length === 0);
}

describe('fan-out', () => {
  test('when five viewers watch one browser, then the pool streams it once and every viewer gets every frame', async () => {
    const vs = await viewers(5);
    await soon(() => pool.openStreams.length === 1);
    assert.deepEqual(pool.openStreams.map((s) => s.purpose), ['viewers']);
    for (let i = 1; i <= 20; i++) {
      push(i);
      // Paced like a screen: each frame is drawn (acked) before the next one comes.
      await soon(() => vs.every((v) => v.frames.at(-1) === i));
    }
    for (const v of vs) assert.deepEqual(v.frames, Array.from({ length: 20 }, (_, i) => i + 1));
    const state = await vs[0]!.message('state');
    assert.equal(state.url, 'https://example.com/');
    assert.deepEqual(state.tabs, [{ id: 't1', url: 'https://example.com/', title: 'Example', active: true }]);
    await closeAll(vs);
  });

  test('when a viewer joins a watched browser, then it sees the latest frame at once', async () => {
    const [first] = await viewers(1);
    await soon(() => pool.openStreams.length === 1);
    push(7);
    await soon(() => first!.frames.includes(7));
    const [late] = await viewers(1);
    await soon(() => late!.frames.includes(7));
    assert.equal(pool.openStreams.length, 1, 'the late viewer shares the stream');
    await closeAll([first!, late!]);
  });
});

describe('slow viewers', () => {
  test('when a viewer stops drawing, then it skips to the newest frame and the others keep every frame', async () => {
    const [fast, stuck] = await viewers(2);
    stuck!.ack = false;
    await soon(() => pool.openStreams.length === 1);
    for (let i = 1; i <= 200; i++) {
      push(i);
      await soon(() => fast!.frames.at(-1) === i);
    }
    assert.equal(fast!.frames.length, 200);
    assert.deepEqual(stuck!.frames, [1, 2], 'two frames in flight, then nothing until they are drawn');
    const [fastConn, stuckConn] = [...edge.viewers];
    assert.equal(fastConn!.stats.skipped + stuckConn!.stats.skipped, 197, 'the stuck viewer holds one waiting frame, the rest were let go');
    // Once it draws again it gets the newest frame, not the backlog.
    stuck!.ack = true;
    stuck!.send({ t: 'ack' });
    await soon(() => stuck!.frames.includes(200));
    assert.deepEqual(stuck!.frames, [1, 2, 200]);
    await closeAll([fast!, stuck!]);
  });
});

describe('input', () => {
  test('when an interactive viewer clicks, then the pool gets the press and the release in order, in frame coordinates', async () => {
    const [v] = await viewers(1);
    pool.inputs.length = 0;
    v!.send({ t: 'mouse', type: 'down', x: 300, y: 250, button: 'left', clicks: 1 });
    v!.send({ t: 'mouse', type: 'up', x: 300, y: 250, button: 'left', clicks: 1 });
    v!.send({ t: 'key', type: 'down', key: 'a', code: 'KeyA', text: 'a' });
    v!.send({ t: 'tab', action: 'navigate', value: 'https://example.org/' });
    await soon(() => pool.inputs.length === 4);
    assert.deepEqual(pool.inputs[0]!.mouse, { type: MouseEventType.MOUSE_EVENT_TYPE_PRESSED, x: 300, y: 250, button: MouseButton.MOUSE_BUTTON_LEFT, clickCount: 1, modifiers: 0 });
    assert.equal(pool.inputs[1]!.mouse!.type, MouseEventType.MOUSE_EVENT_TYPE_RELEASED);
    assert.equal(pool.inputs[2]!.key!.text, 'a');
    assert.equal(pool.inputs[3]!.tab!.navigateUrl, 'https://example.org/');
    assert.ok(pool.inputs.every((i) => i.projectId === PROJECT && i.browserId === BROWSER));
    await closeAll([v!]);
  });

  test('when a view-only viewer sends input, then the server refuses it and the pool gets nothing', async () => {
    const [v] = await viewers(1, 'view');
    assert.equal((await v!.message('hello')).mode, 'view');
    pool.inputs.length = 0;
    v!.send({ t: 'mouse', type: 'down', x: 300, y: 250, button: 'left', clicks: 1 });
    const refused = await v!.message('error');
    assert.equal(refused.code, 'view_only');
    // A later ack still works: the socket stays open for watching.
    v!.send({ t: 'ack' });
    assert.equal(pool.inputs.length, 0);
    await closeAll([v!]);
  });

  test('when a message is malformed, then the viewer is told and nothing reaches the pool', async () => {
    const [v] = await viewers(1);
    pool.inputs.length = 0;
    v!.send({ t: 'mouse', type: 'down', x: 'left', y: 1 });
    assert.equal((await v!.message('error')).code, 'bad_message');
    assert.equal(pool.inputs.length, 0);
    await closeAll([v!]);
  });
});

describe('ends', () => {
  test('when the link expires while watching, then the socket closes as expired', async () => {
    clockLagMs = 58_500; // minted 58.5 s "ago" with a 60 s lifetime (whole seconds): 0.5 to 1.5 s left
    const v = new TestViewer(socketUrl('interactive', 60));
    clockLagMs = 0;
    assert.equal((await v.message('hello')).mode, 'interactive');
    assert.deepEqual(await v.closed, [CloseCode.tokenExpired, 'Link expired']);
    await soon(() => pool.openStreams.length === 0);
  });

  test('when the token is for another browser or tampered, then the socket closes as invalid without a frame', async () => {
    await soon(() => pool.openStreams.length === 0);
    const wrong = new TestViewer(socketUrl('interactive', 600, 'brw_other'));
    const tampered = new TestViewer(socketUrl().replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')));
    assert.deepEqual(await wrong.closed, [CloseCode.tokenInvalid, 'Invalid link']);
    assert.deepEqual(await tampered.closed, [CloseCode.tokenInvalid, 'Invalid link']);
    assert.equal(wrong.frames.length + tampered.frames.length, 0);
    assert.equal(pool.streams.filter((s) => !s.call.cancelled && !s.call.writableEnded).length, 0, 'no stream was opened for them');
  });

  test('when the browser stops, then every viewer is told and the socket closes', async () => {
    const vs = await viewers(2);
    await soon(() => pool.openStreams.length === 1);
    pool.stop();
    for (const v of vs) {
      assert.equal((await v.message('ended')).reason, 'stopped');
      assert.deepEqual(await v.closed, [CloseCode.ended, 'Browser stopped']);
    }
  });

  test('when the page is requested, then it can be embedded and carries no token-leaking referrer', async () => {
    const token = mintLiveViewToken(signer, PROJECT, BROWSER, 'interactive', 600).token;
    const res = await fetch(`${base.replace('ws:', 'http:')}/browsers/${BROWSER}?token=${token}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-frame-options'), null);
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors \*/);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    const bad = await fetch(`${base.replace('ws:', 'http:')}/browsers/${BROWSER}?token=view.${PROJECT}.1.${'A'.repeat(43)}`);
    assert.equal(bad.status, 403);
    assert.match(await bad.text(), /data-state="invalid"/);
  });
});
