/** `npm run keys -- create|list|revoke` against the gateway's embedded database. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../scripts/stack.js';
import { openDatabase } from '../services/common/src/db.js';
import { ApiKeyRepository, migrations } from '../gateway/src/api-key.repository.js';
import { tempDir } from './support/infra.js';

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

    const db = await openDatabase({ service: 'gateway', dataDir, migrations });
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

    const db = await openDatabase({ service: 'gateway', dataDir, migrations });
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

test('when the gateway holds the embedded database, then the CLI refuses with a clear message', () => {
  const dataDir = tempDir('keys-cli');
  fs.mkdirSync(path.join(dataDir, 'gateway'), { recursive: true });
  fs.writeFileSync(path.join(dataDir, 'gateway', '.lock'), String(process.pid)); // a live process: this test
  const r = keys(dataDir, 'list');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /held by running process \d+; stop it first/);
  fs.rmSync(dataDir, { recursive: true, force: true });
});
