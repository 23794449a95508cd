/** Per-country proxies: the upstream handed to a browser's egress proxy. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { Proxies } from './proxies.js';

test('when a country is configured, then upstreamFor gives its URL with credentials, and an unknown one is undefined and fails check', () => {
  const proxies = new Proxies(new Map([['de', new URL('http://user:p%40ss@proxy.example:3128')], ['fr', new URL('socks5://10.0.0.1:1080')]]));
  const de = proxies.upstreamFor('de')!;
  assert.equal(de.href, 'http://user:p%40ss@proxy.example:3128/');
  de.password = 'changed';
  assert.equal(proxies.upstreamFor('de')!.password, 'p%40ss', 'callers get a copy');
  assert.equal(proxies.upstreamFor('fr')!.href, 'socks5://10.0.0.1:1080');
  assert.equal(proxies.upstreamFor('us'), undefined);
  assert.throws(() => proxies.check('us'), (e: unknown) => e instanceof InvalidArgumentError && /No proxy is configured for country "us"/.test(e.message));
});
