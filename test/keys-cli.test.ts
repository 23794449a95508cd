/** `npm run keys -- create|list|revoke` against the gateway's embedded database. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../scripts/stack.js';
import { openDatabase } from '../services/common/src/db.js';
import { embeddedDatabaseRunning, openStackDatabase } from '../services/common/src/embedded-database.js';
import { ApiKeyRepository, migrations } from '../gateway/src/api-key.repository.js';
import { tempDir } from './support/infra.js';
import { until } from './support/until.js';

function keys(dataDir: string, ...args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'gateway/src/keys.cli.ts'), ...args], { cwd: ROOT, env, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('when a key is created, listed and revoked with the CLI, then the gateway database agrees at each step', async () => {
  const dataDir = tempDir('keys-cli');
  try {
    const created = keys(dataDir, 'create', '--project', 'demo', '--name', 'laptop');
    assert.equal(created.code, 0, created.stderr);
    const key = created.stdout.trim();
    assert.match(key, /^ats_[0-9A-Za-z]{32}$/);

    const listed = keys(dataDir, 'list');
    assert.equal(listed.code, 0);
    assert.match(listed.stdout, new RegExp(`${key.slice(0, 12)}….*demo\\tlaptop.*active`));
    assert.ok(!listed.stdout.includes(key), 'the plaintext is never listed');

    const revoked = keys(dataDir, 'revoke', key.slice(0, 12));
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal(keys(dataDir, 'revoke', key.slice(0, 12)).code, 1, 'revoking twice finds nothing to revoke');

    const db = await openStackDatabase({ service: 'gateway', dataDir, migrations });
    try {
      assert.equal(await new ApiKeyRepository(db.knex).projectFor(key), undefined);
    } finally {
      await db.stop();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('when a read key is created with the CLI, then it is listed with its scope and the database grants it read only', async () => {
  const dataDir = tempDir('keys-cli');
  try {
    const created = keys(dataDir, 'create', '--project', 'demo', '--name', 'reports', '--scope', 'read');
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /created read key/);
    const key = created.stdout.trim();
    assert.match(keys(dataDir, 'list').stdout, new RegExp(`${key.slice(0, 12)}….*demo\treports\tread\t.*never used`));
    assert.equal(keys(dataDir, 'create', '--scope', 'admin').code, 2, 'an unknown scope is a usage error');

    const db = await openStackDatabase({ service: 'gateway', dataDir, migrations });
    try {
      assert.equal((await new ApiKeyRepository(db.knex).grantFor(key))?.scope, 'read');
    } finally {
      await db.stop();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('when the command is unknown, then usage is printed and the exit code is 2', () => {
  const dataDir = tempDir('keys-cli');
  const r = keys(dataDir, 'frobnicate');
  assert.equal(r.code, 2);
  assert.match(r.stderr, /usage: npm run keys/);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('when the stack runs, then the CLI makes keys through its database process', async () => {
  const dataDir = tempDir('keys-cli');
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  const database = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'services/database/src/main.ts')], { cwd: ROOT, env, stdio: 'ignore' });
  const exited = new Promise((resolve) => database.once('exit', resolve));
  try {
    await until(() => embeddedDatabaseRunning(dataDir), { timeoutMs: 60_000, what: 'the database process listening' });
    const created = keys(dataDir, 'create', '--project', 'live');
    assert.equal(created.code, 0, created.stderr);
    const db = await openStackDatabase({ service: 'gateway', dataDir, migrations });
    try {
      assert.ok(await new ApiKeyRepository(db.knex).projectFor(created.stdout.trim()), 'the key is in the database the running gateway reads');
    } finally {
      await db.stop();
    }
  } finally {
    database.kill('SIGTERM');
    await exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('when the database is being opened by another process, then the CLI refuses with a clear message', () => {
  const dataDir = tempDir('keys-cli');
  fs.mkdirSync(path.join(dataDir, 'database'), { recursive: true });
  fs.writeFileSync(path.join(dataDir, 'database', '.lock'), String(process.pid)); // a live process: this test
  const r = keys(dataDir, 'list');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /held by running process \d+; stop it first/);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('when the data directory has a database per service (the older layout), then the CLI uses the gateway\'s', async () => {
  const dataDir = tempDir('keys-cli');
  try {
    const db = await openDatabase({ service: 'gateway', dataDir, migrations });
    const { key } = await new ApiKeyRepository(db.knex).create('older', 'before');
    await db.stop();
    const listed = keys(dataDir, 'list');
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`${key.slice(0, 12)}….*older\tbefore`));
    assert.ok(!fs.existsSync(path.join(dataDir, 'database')), 'no embedded database was made beside it');
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
