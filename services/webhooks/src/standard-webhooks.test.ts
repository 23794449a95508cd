import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
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
