import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { navigableUrl } from './input.js';

test('when a URL is typed into the URL bar, then web URLs open, a bare host gets https and local schemes are refused', () => {
  assert.equal(navigableUrl('example.com/a?b=1'), 'https://example.com/a?b=1');
  assert.equal(navigableUrl(' http://127.0.0.1:8080/x '), 'http://127.0.0.1:8080/x');
  assert.equal(navigableUrl('about:blank'), 'about:blank');
  for (const bad of ['file:///etc/passwd', 'javascript:alert(1)', 'chrome://settings', 'view-source:https://a.b', 'data:text/html,hi', '']) {
    assert.throws(() => navigableUrl(bad), InvalidArgumentError, bad);
  }
});
