import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keepDownloadsHere } from './cdp-proxy.js';

const msg = (o: unknown) => Buffer.from(JSON.stringify(o));

test("when a client sets where downloads go, then the browser's own folder is kept and the rest of the message is untouched", () => {
  const out = JSON.parse(
    keepDownloadsHere(msg({ id: 7, method: 'Browser.setDownloadBehavior', params: { behavior: 'allowAndName', downloadPath: '/home/me/tmp', eventsEnabled: true }, sessionId: 'S' }), '/pool/b/downloads').toString(),
  );
  assert.deepEqual(out, { id: 7, method: 'Browser.setDownloadBehavior', params: { behavior: 'allowAndName', downloadPath: '/pool/b/downloads', eventsEnabled: true }, sessionId: 'S' });
  const byDefault = JSON.parse(keepDownloadsHere(msg({ id: 8, method: 'Page.setDownloadBehavior', params: { behavior: 'default' } }), '/d').toString());
  assert.deepEqual(byDefault.params, { behavior: 'allow', downloadPath: '/d' });
  const deny = msg({ id: 9, method: 'Browser.setDownloadBehavior', params: { behavior: 'deny' } });
  assert.equal(keepDownloadsHere(deny, '/d'), deny, 'a client may refuse downloads');
  const other = msg({ id: 10, method: 'Page.navigate', params: { url: 'https://x.test/setDownloadBehavior' } });
  assert.equal(keepDownloadsHere(other, '/d'), other);
});
