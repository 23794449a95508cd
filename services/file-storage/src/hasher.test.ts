import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { BackgroundHasher } from './hasher.js';

test('when uploads are hashed on the worker side by side, then each gets the digest of exactly its own bytes, in order', async () => {
  const hasher = new BackgroundHasher();
  try {
    const inputs = [0, 1, 5, 300].map((n) => Array.from({ length: n }, () => randomBytes(1 + Math.floor(Math.random() * 70_000))));
    const jobs = inputs.map(() => hasher.start());
    const dropped = hasher.start();
    dropped.update(Buffer.from('never digested'));
    dropped.discard();
    const longest = Math.max(...inputs.map((c) => c.length));
    for (let i = 0; i < longest; i++) inputs.forEach((chunks, j) => chunks[i] && jobs[j]!.update(chunks[i]!));
    const digests = await Promise.all(jobs.map((j) => j.digest()));
    assert.deepEqual(digests, inputs.map((chunks) => createHash('sha256').update(Buffer.concat(chunks)).digest('hex')));
    const chunk = Buffer.from('the caller keeps its buffer');
    const again = hasher.start();
    again.update(chunk);
    assert.equal(chunk.toString(), 'the caller keeps its buffer', 'a copy is sent, the chunk stays usable');
    assert.equal(await again.digest(), createHash('sha256').update(chunk).digest('hex'));
  } finally {
    await hasher.close();
  }
});
