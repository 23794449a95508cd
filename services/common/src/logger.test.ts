import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, redactUrl } from './logger.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { lines, stream };
}

test('when secrets are logged, then they are redacted and the service name is on the line', () => {
  const { lines, stream } = capture();
  const log = createLogger('gateway', 'info', stream);
  log.info({ apiKey: 'ats_secret1', req: { headers: { 'x-service-api-key': 'ats_secret2' } }, config: { databaseUrl: 'postgres://u:pw@h/db', signingSecret: 's3' }, token: 't0k' }, 'hello');
  const line = lines.join('');
  const parsed = JSON.parse(line);
  assert.equal(parsed.service, 'gateway');
  assert.equal(parsed.msg, 'hello');
  for (const secret of ['ats_secret1', 'ats_secret2', 'pw@h', 's3', 't0k']) assert.ok(!line.includes(secret), `${secret} leaked: ${line}`);
});

test('when a URL with a token is redacted, then the query string is gone', () => {
  assert.equal(redactUrl('/browsers/brw_1?token=abc.def'), '/browsers/brw_1?[redacted]');
  assert.equal(redactUrl('/healthz'), '/healthz');
});
