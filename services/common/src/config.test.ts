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

test('when an address names every replica with the dns:/// scheme, then it is kept for the gRPC client as given; a scheme without host:port is refused', () => {
  assert.equal(loadConfig(spec, { PEER_ADDR: 'dns:///run-grpc.ats.svc.cluster.local:50051' }).peer, 'dns:///run-grpc.ats.svc.cluster.local:50051');
  for (const bad of ['dns:///run-grpc', 'dns://run-grpc:50051', 'http://run:50051']) {
    assert.throws(() => loadConfig(spec, { PEER_ADDR: bad }), /PEER_ADDR must be host:port or dns:\/\/\/host:port/, bad);
  }
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
