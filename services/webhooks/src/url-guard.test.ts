import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkWebhookUrl, refusal } from './url-guard.js';

const off = { allowLoopback: false, deniedPorts: [] };
const on = { allowLoopback: true, deniedPorts: [4222] };

describe('webhook URL guard', () => {
  test('when loopback receivers are not allowed, then 127.0.0.1, ::1, localhost and a v4-mapped loopback are refused', async () => {
    for (const url of ['http://127.0.0.1:8080/h', 'http://[::1]/h', 'http://localhost:9000/h', 'http://[::ffff:127.0.0.1]/h']) {
      await assert.rejects(checkWebhookUrl(url, off), /loopback/, url);
    }
  });

  test('when loopback receivers are allowed, then loopback passes but private, link-local, metadata and denied ports stay refused', async () => {
    assert.equal((await checkWebhookUrl('http://127.0.0.1:8080/h', on)).host, '127.0.0.1:8080');
    for (const ip of ['10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', 'fd12::1', 'fe80::1', '::ffff:10.0.0.1']) {
      assert.match(refusal(ip, on) ?? '', /private|reserved/, ip);
    }
    await assert.rejects(checkWebhookUrl('http://127.0.0.1:4222/', on), /port 4222/);
  });

  test('when a URL is public, then it passes; other schemes and credentials are refused', async () => {
    assert.equal(refusal('93.184.216.34', off), undefined);
    assert.equal(refusal('2606:4700::1111', off), undefined);
    await assert.rejects(checkWebhookUrl('ftp://93.184.216.34/', off), /http or https/);
    await assert.rejects(checkWebhookUrl('http://u:p@93.184.216.34/', off), /credentials/);
    await assert.rejects(checkWebhookUrl('not a url', off), /absolute/);
  });
});
