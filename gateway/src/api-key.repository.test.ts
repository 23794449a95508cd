import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import { drivers, tempDir, testSchema } from '../../test/support/infra.js';
import { openDatabase } from '../../services/common/src/db.js';
import { ApiKeyRepository, hashApiKey, migrations } from './api-key.repository.js';
import { ApiKeyAuthenticator } from './auth.js';

for (const driver of await drivers()) {
  describe(`API keys on ${driver.name}`, () => {
    test('when keys are created, listed and revoked, then only unrevoked keys authenticate and no plaintext is stored', async () => {
      const dataDir = tempDir('keys');
      const db = await openDatabase({ service: 'gateway', dataDir, databaseUrl: driver.databaseUrl, schema: testSchema(), migrations });
      try {
        const repo = new ApiKeyRepository(db.knex);
        const a = await repo.create('alpha', 'ci');
        const b = await repo.create('beta', 'ci');
        assert.match(a.key, /^ats_[0-9A-Za-z]{32}$/);
        assert.notEqual(a.info.projectId, b.info.projectId);
        assert.equal(await repo.projectFor(a.key), a.info.projectId);
        assert.equal(await repo.projectFor('ats_wrong'), undefined);

        const rows = await db.knex('api_keys').select('*');
        assert.ok(rows.every((r) => r.key_hash !== a.key && r.key_hash !== b.key));
        assert.ok(rows.some((r) => r.key_hash === hashApiKey(a.key)));

        // Registering the same key again (BOOTSTRAP_API_KEY on every start) adds nothing.
        await repo.register(a.key, 'alpha', 'again');
        assert.equal((await repo.list()).length, 2);

        const auth = new ApiKeyAuthenticator(repo);
        assert.equal((await auth.authenticate(b.key))?.projectId, b.info.projectId);
        assert.equal(await repo.revoke(b.info.prefix), 1);
        assert.equal(await auth.authenticate(b.key), undefined);
        assert.equal((await repo.list()).find((k) => k.id === b.info.id)!.revokedAt !== null, true);
      } finally {
        if (db.schema) await db.knex.raw(`drop schema "${db.schema}" cascade`);
        await db.stop();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
}
