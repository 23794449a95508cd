import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, address, bool, int, loadConfig, optionalUrl, port, str } from './config.js';

const spec = {
  port: port('GRPC_PORT', { default: 50051 }),
  peer: address('PEER_ADDR'),
  name: str('NAME', { default: 'x' }),
  debug: bool('DEBUG', { default: false }),
  db: optionalUrl('DATABASE_URL', ['postgres']),
  workers: int('WORKERS', { default: 2, min: 1, max: 8 }),
};

test('when every variable is valid or defaulted, then the typed values come back', () => {
  const c = loadConfig(spec, { PEER_ADDR: 'run:50051', DEBUG: 'yes', WORKERS: '4' });
  assert.deepEqual(c, { port: 50051, peer: 'run:50051', name: 'x', debug: true, db: undefined, workers: 4 });
});

test('when a required variable is missing, then the error names it', () => {
  assert.throws(() => loadConfig(spec, {}), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.match(err.message, /PEER_ADDR is required/);
    return true;
  });
});

test('when several variables are malformed, then one error lists each by name', () => {
  assert.throws(
    () => loadConfig(spec, { PEER_ADDR: 'nohost', GRPC_PORT: '70000', WORKERS: 'many', DEBUG: 'maybe', DATABASE_URL: 'mysql://u:secret@h/db' }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.problems.length, 5);
      for (const name of ['PEER_ADDR', 'GRPC_PORT', 'WORKERS', 'DEBUG', 'DATABASE_URL']) assert.match(err.message, new RegExp(name));
      assert.doesNotMatch(err.message, /secret/, 'a URL that may hold credentials is never echoed');
      return true;
    },
  );
});

test('when a service address names every replica (DNS or a list), then it is taken as a gRPC target; a malformed one is refused', () => {
  for (const peer of ['run:50051', 'dns:///run-grpc.ats.svc.cluster.local:50051', 'dns:run:50051', 'ipv4:127.0.0.1:5001,127.0.0.1:5002', 'ipv6:[::1]:5001,[::1]:5002']) {
    assert.equal(loadConfig(spec, { PEER_ADDR: peer }).peer, peer);
  }
  for (const peer of ['dns:///run', 'ipv4:127.0.0.1:5001,', 'ipv4:', 'http://run:50051', 'run:99999']) {
    assert.throws(() => loadConfig(spec, { PEER_ADDR: peer }), /PEER_ADDR must be host:port, dns:\/\/\/host:port or ipv4/, peer);
  }
});
