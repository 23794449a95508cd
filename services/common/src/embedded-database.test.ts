import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../../../test/support/infra.js';
import { embeddedDatabasePassword, embeddedDatabaseUrl, hasPerServiceDatabases } from './embedded-database.js';

test('when a data directory holds a PGlite of a service (the older layout), then it is seen, and a new one is not', () => {
  const dir = tempDir('embedded-db');
  try {
    assert.equal(hasPerServiceDatabases(dir), false);
    fs.mkdirSync(path.join(dir, 'run', 'pgdata'), { recursive: true });
    assert.equal(hasPerServiceDatabases(dir), false, 'a folder without a database in it is not the older layout');
    fs.writeFileSync(path.join(dir, 'run', 'pgdata', 'PG_VERSION'), '18\n');
    assert.equal(hasPerServiceDatabases(dir), true);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('when the URL is made, then it names the socket folder and a password kept private and stable', () => {
  const dir = tempDir('embedded-db');
  try {
    const url = new URL(embeddedDatabaseUrl(dir));
    assert.equal(decodeURIComponent(url.hostname), path.join(dir, 'database'));
    const password = embeddedDatabasePassword(dir);
    assert.equal(decodeURIComponent(url.password), password);
    assert.ok(password.length >= 32);
    assert.equal(fs.statSync(path.join(dir, 'database', 'password')).mode & 0o777, 0o600);
    assert.equal(embeddedDatabasePassword(dir), password, 'the same password on every start');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('when the data directory is too deep for a Unix socket path, then the error says so without naming it', () => {
  const deep = path.join('/tmp', 'x'.repeat(120));
  assert.throws(() => embeddedDatabaseUrl(deep), (err: Error) => /socket path is too long/.test(err.message) && !err.message.includes(deep));
  fs.rmSync(deep, { recursive: true, force: true });
});
