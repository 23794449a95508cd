import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { after, test } from 'node:test';
import { Metadata } from '@grpc/grpc-js';
import { ConfigError } from './config.js';
import { InternalToken, loadInternalToken } from './internal-token.js';
import { createLogger } from './logger.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-internal-token-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const TOKEN = 'a-deployment-token-0123456789-abcdefghij';
const sends = (t: InternalToken) => t.apply(new Metadata());

test('when neither INTERNAL_TOKEN nor INTERNAL_TOKEN_FILE is set, then every process with the same DATA_DIR gets one token, generated once with mode 0600', () => {
  const dataDir = path.join(dir, 'generated');
  const first = loadInternalToken({ dataDir });
  const second = loadInternalToken({ dataDir });
  assert.ok(second.accepts(sends(first)), 'a second process accepts the first one');
  const file = path.join(dataDir, 'internal-token');
  assert.equal((fs.statSync(file).mode & 0o777).toString(8), '600');
  assert.deepEqual(fs.readdirSync(dataDir), ['internal-token'], 'no temporary file is left');
  assert.ok(!loadInternalToken({ dataDir: path.join(dir, 'elsewhere') }).accepts(sends(first)), 'another DATA_DIR is another deployment');
});

test('when INTERNAL_TOKEN or INTERNAL_TOKEN_FILE is set, then that token is used, and a bad one stops the process naming the variable', () => {
  const file = path.join(dir, 'mounted-secret');
  fs.writeFileSync(file, `${TOKEN}\n`);
  const fromEnv = loadInternalToken({ internalToken: TOKEN, dataDir: dir });
  const fromFile = loadInternalToken({ internalTokenFile: file, dataDir: dir });
  assert.ok(fromFile.accepts(sends(fromEnv)));
  assert.ok(!fs.existsSync(path.join(dir, 'internal-token')), 'nothing is generated when a token is configured');

  const short = path.join(dir, 'short');
  fs.writeFileSync(short, 'too-short');
  const refused = (settings: Parameters<typeof loadInternalToken>[0], variable: RegExp) =>
    assert.throws(() => loadInternalToken(settings), (err: unknown) => err instanceof ConfigError && variable.test(err.message));
  refused({ internalTokenFile: short, dataDir: dir }, /INTERNAL_TOKEN_FILE must be at least 32/);
  refused({ internalTokenFile: path.join(dir, 'missing'), dataDir: dir }, /INTERNAL_TOKEN_FILE: cannot read/);
  refused({ internalToken: `${TOKEN} with spaces`, dataDir: dir }, /INTERNAL_TOKEN must be printable ASCII/);
  refused({ internalToken: TOKEN, internalTokenFile: file, dataDir: dir }, /not both/);
});

test('when metadata carries another token, a prefix of it or none, then it is not accepted', () => {
  const token = new InternalToken(TOKEN);
  assert.ok(token.accepts(sends(new InternalToken(TOKEN))));
  for (const value of [undefined, '', TOKEN, `Bearer ${TOKEN.slice(0, -1)}`, `Bearer ${TOKEN}x`, `bearer ${TOKEN}`]) {
    const md = new Metadata();
    if (value !== undefined) md.set('authorization', value);
    assert.equal(token.accepts(md), false, JSON.stringify(value));
  }
});

test('when the token or a config holding it is logged or inspected, then it does not appear', () => {
  const token = new InternalToken(TOKEN);
  const lines: string[] = [];
  const log = createLogger('test', 'info', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
  log.info({ token, credential: token, config: { internalToken: TOKEN, natsToken: 'nats-secret-value' }, internalToken: TOKEN }, 'hello');
  const text = lines.join('') + JSON.stringify({ token }) + inspect({ token }) + String(token);
  assert.ok(!text.includes(TOKEN), text);
  assert.ok(!text.includes('nats-secret-value'), text);
});
