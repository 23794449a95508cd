import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cookieDomains } from './profile-state.js';

test('when cookie domains are listed, then they are unique, without the leading dot, sorted', () => {
  const c = (domain: string) => ({ name: 'n', value: 'v', domain, path: '/', httpOnly: false, secure: false });
  assert.deepEqual(cookieDomains({ cookies: [c('.example.com'), c('b.test'), c('example.com'), c('A.test')], origins: [] }), ['a.test', 'b.test', 'example.com']);
  assert.deepEqual(cookieDomains({ cookies: [], origins: [] }), []);
});
