import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../../clients/typescript/src/webhooks.js';
import { newSecret, signedHeaders } from './standard-webhooks.js';

test('when a body is signed with two secrets, then the standardwebhooks library verifies it with either, and not with a third or a changed body', () => {
  const [a, b, c] = [newSecret(), newSecret(), newSecret()];
  assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const body = JSON.stringify({ id: 'evt_1', type: 'run.completed', createdAt: new Date().toISOString(), data: { id: 'run_1' } });
  const headers = signedHeaders([a, b], 'evt_1', body);
  assert.equal(headers['webhook-id'], 'evt_1');
  assert.deepEqual(new Webhook(a).verify(body, headers), JSON.parse(body));
  assert.deepEqual(new Webhook(b).verify(body, headers), JSON.parse(body));
  assert.throws(() => new Webhook(c).verify(body, headers));
  assert.throws(() => new Webhook(a).verify(body.replace('run_1', 'run_2'), headers));
});

test('when the SDK’s verifyWebhook checks a delivery signed here, and the Standard Webhooks test vector, then both pass; a stale one or another secret is refused', async () => {
  const secret = newSecret();
  const body = JSON.stringify({ id: 'evt_2', type: 'run.failed', createdAt: new Date().toISOString(), data: { id: 'run_2' } });
  const headers = signedHeaders([secret], 'evt_2', body);
  assert.deepEqual(await verifyWebhook(secret, body, headers), JSON.parse(body));
  await assert.rejects(verifyWebhook(newSecret(), body, headers), WebhookVerificationError);
  await assert.rejects(verifyWebhook(secret, body, new Headers(headers), { now: new Date(Date.now() + 600_000) }), /not recent/);
  // The vector of the Standard Webhooks libraries' own tests.
  const vector = { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330', 'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' };
  assert.deepEqual(await verifyWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '{"test": 2432232314}', vector, { now: new Date(1614265330_000) }), { test: 2432232314 });
  assert.equal(signedHeaders(['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], vector['webhook-id'], '{"test": 2432232314}', new Date(1614265330_000))['webhook-signature'], vector['webhook-signature']);
});
