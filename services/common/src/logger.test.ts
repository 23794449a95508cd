import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, currentRequestId, redactUrl, withRequestId } from './logger.js';

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

test('when code runs within a request, then every line of the logger and its children carries the id, once; outside, none', async () => {
  const { lines, stream } = capture();
  const log = createLogger('run', 'info', stream);
  const child = log.child({ runId: 'run_1' });
  await withRequestId('req-1', async () => {
    await new Promise((r) => setTimeout(r, 1));
    log.info('inside');
    child.info({ requestId: 'req-1' }, 'inside child');
    withRequestId(undefined, () => log.info('left the request'));
  });
  log.info('outside');
  withRequestId('not a request id!', () => log.info('malformed'));
  const got = lines.map((l) => JSON.parse(l) as { msg: string; requestId?: string });
  assert.deepEqual(got.map((l) => [l.msg, l.requestId]), [['inside', 'req-1'], ['inside child', 'req-1'], ['left the request', undefined], ['outside', undefined], ['malformed', undefined]]);
  assert.equal(lines[1]!.match(/"requestId"/g)!.length, 1, 'no duplicate key');
  assert.equal(currentRequestId(), undefined);
});
