/** CDP clients multiplexed over one browser's pipe (real Chromium): ids, sessions and endings of their own. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { createLogger } from '../../common/src/logger.js';
import { retext, type CdpChannel, type CdpMessage } from './cdp-connection.js';
import { Chromium } from './chromium.js';
import { hostConfinement } from './testing/confinement.js';
import { defaultChromiumPath } from './config.js';

let chromium: Chromium;
let root: string;

before(async () => {
  root = path.join(tempDir('bp-cdp'), 'browsers');
  chromium = await Chromium.launch({ executable: defaultChromiumPath(), rootDir: root, id: 'brw_cdp', width: 800, height: 600, confinement: hostConfinement(), logger: createLogger('test', 'silent') });
});

after(async () => {
  await chromium.stop();
  fs.rmSync(path.dirname(root), { recursive: true, force: true });
});

/** A client of its own: what it receives, and a way to await the answer to one of its ids. */
async function client(targetId?: string): Promise<{ channel: CdpChannel; got: CdpMessage[]; call(id: number, method: string, params?: object, sessionId?: string): Promise<CdpMessage>; ended: Promise<void> }> {
  const got: CdpMessage[] = [];
  const waiters = new Map<number, (m: CdpMessage) => void>();
  const channel = await chromium.conn.openChannel(
    targetId,
    (text) => {
      const m = JSON.parse(text) as CdpMessage;
      got.push(m);
      if (m.id !== undefined) waiters.get(m.id)?.(m);
    },
    (msg) => ({ send: msg }),
  );
  const ended = new Promise<void>((r) => channel.onClose(r));
  return {
    channel,
    got,
    ended,
    call: (id, method, params = {}, sessionId) =>
      new Promise((resolve) => {
        waiters.set(id, resolve);
        channel.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      }),
  };
}

test('when two clients and the pool send the same ids at once, then each gets its own answers and events of its own sessions only', async () => {
  const [a, b] = await Promise.all([client(), client()]);
  const [va, vb, pool] = await Promise.all([a.call(1, 'Browser.getVersion'), b.call(1, 'Target.getTargets'), chromium.conn.send('Browser.getVersion')]);
  assert.match(va.result.product, /Chrome/);
  assert.ok(Array.isArray(vb.result.targetInfos), "b's id 1 is b's own command");
  assert.match((pool as { product: string }).product, /Chrome/);
  assert.equal(va.sessionId, undefined, "a client's root session is invisible to it, as on a browser WebSocket");

  const { result } = await a.call(2, 'Target.createTarget', { url: 'about:blank' });
  const attached = await a.call(3, 'Target.attachToTarget', { targetId: result.targetId, flatten: true });
  const sessionId = attached.result.sessionId as string;
  const evaluated = await a.call(4, 'Runtime.evaluate', { expression: '6 * 7', returnByValue: true }, sessionId);
  assert.equal(evaluated.result.result.value, 42);
  assert.equal(evaluated.sessionId, sessionId);

  const foreign = await b.call(2, 'Runtime.evaluate', { expression: '1' }, sessionId);
  assert.match(foreign.error!.message, /Session with given id not found/, "b cannot drive a's session");
  assert.ok(!b.got.some((m) => m.id === undefined && m.sessionId === sessionId), "b sees none of a's session's events");

  a.channel.close();
  b.channel.close();
  await chromium.conn.send('Target.closeTarget', { targetId: result.targetId });
});

test("when a client is rooted at a page and the page closes, then the client's channel ends", async () => {
  const { targetId } = await chromium.conn.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
  const c = await client(targetId);
  const r = await c.call(1, 'Runtime.evaluate', { expression: 'location.href', returnByValue: true });
  assert.equal(r.result.result.value, 'about:blank', 'commands without a session go to the page');
  await chromium.conn.send('Target.closeTarget', { targetId });
  await c.ended;
  assert.equal(c.channel.isClosed, true);
});

test("when a message from Chromium is passed to a client, then its text is edited, not re-encoded: the client's id, no root session, the rest byte for byte", () => {
  const answer = '{"id":41,"result":{"result":{"type":"string","value":"caf\\u00e9 \\u2028"}},"sessionId":"ROOT"}';
  assert.equal(retext(answer, JSON.parse(answer), 7, 'ROOT'), '{"id":7,"result":{"result":{"type":"string","value":"caf\\u00e9 \\u2028"}}}');
  const event = '{"method":"Page.loadEventFired","params":{"timestamp":1.5},"sessionId":"CHILD"}';
  assert.equal(retext(event, JSON.parse(event), undefined, 'ROOT'), event, 'an event of a page session goes as it came');
  const rootEvent = '{"method":"Target.targetCreated","params":{},"sessionId":"ROOT"}';
  assert.equal(retext(rootEvent, JSON.parse(rootEvent), undefined, 'ROOT'), '{"method":"Target.targetCreated","params":{}}');
  for (const odd of ['{"result":{},"id":41}', '{ "id":41,"result":{}}', '{"id":41,"result":{},"sessionId":"ROOT" }']) {
    const msg = JSON.parse(odd);
    assert.equal(retext(odd, msg, 7, 'ROOT'), undefined, `not edited: ${odd}`);
  }
});
