/** Which key an MCP request carries, and the address its tools call back on. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Request } from 'express';
import { localUrl, mcpKey } from './mcp-endpoint.js';

function request(headers: Record<string, string>, socket: { localAddress?: string; localPort?: number } = {}): Request {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { get: (name: string) => lower[name.toLowerCase()], socket } as unknown as Request;
}

test('when an MCP client sends the key as the API header or a bearer token, then that is the key; any other scheme is none', () => {
  assert.equal(mcpKey(request({ 'X-Service-API-Key': 'ats_a' })), 'ats_a');
  assert.equal(mcpKey(request({ Authorization: 'Bearer ats_b' })), 'ats_b');
  assert.equal(mcpKey(request({ Authorization: 'bearer   ats_c  ' })), 'ats_c');
  assert.equal(mcpKey(request({ 'X-Service-API-Key': 'ats_a', Authorization: 'Bearer ats_b' })), 'ats_a', 'the API header wins');
  assert.equal(mcpKey(request({ Authorization: 'Basic YTpi' })), undefined);
  assert.equal(mcpKey(request({ Authorization: 'Bearer two words' })), undefined);
  assert.equal(mcpKey(request({})), undefined);
});

test('when a request came in on an address, then the tools call the gateway back on that address and port', () => {
  assert.equal(localUrl(request({}, { localAddress: '127.0.0.1', localPort: 8080 })), 'http://127.0.0.1:8080');
  assert.equal(localUrl(request({}, { localAddress: '::ffff:10.0.0.7', localPort: 8080 })), 'http://10.0.0.7:8080');
  assert.equal(localUrl(request({}, { localAddress: '::1', localPort: 9000 })), 'http://[::1]:9000');
});
