/** The filter engine over list files: what it blocks and hides, and its cache of the parsed lists. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FiltersEngine } from '@ghostery/adblocker';
import { tempDir } from '../../../test/support/infra.js';
import { AdBlocker } from './adblock.js';

const LIST = ['||ads.example.test^', '##.sponsored-box', 'news.example.org##.house-ad'].join('\n');

test('when lists are loaded from files, then requests and elements they name are blocked and hidden, and the parsed engine is cached', async () => {
  const dir = tempDir('adblock-');
  const list = path.join(dir, 'list.txt');
  fs.writeFileSync(list, LIST);
  const cache = path.join(dir, 'cache');
  const b = await AdBlocker.load([list], cache);
  assert.equal(b.blocking('https://cdn.ads.example.test/'), '||ads.example.test^');
  assert.equal(b.blocking('https://news.example.org/'), undefined);
  assert.match(b.hostStyles('https://news.example.org/a'), /\.house-ad/, "the host's own rule");
  assert.doesNotMatch(b.hostStyles('https://other.example.net/a'), /\.house-ad/);
  assert.match(b.domStyles('https://other.example.net/a', { classes: ['sponsored-box'], ids: [], hrefs: [] }), /\.sponsored-box/, 'a generic rule the document matches');
  assert.equal(b.domStyles('https://other.example.net/a', { classes: ['story'], ids: [], hrefs: [] }), '');
  const [entry] = fs.readdirSync(cache);
  assert.match(entry!, /\.engine$/);

  // The next process reads the cached engine instead of parsing: one planted under the same name is what it gets.
  const planted = path.join(dir, 'planted');
  fs.mkdirSync(planted);
  fs.writeFileSync(path.join(planted, entry!), FiltersEngine.parse('||planted.example.test^').serialize());
  const fromCache = await AdBlocker.load([list], planted);
  assert.equal(fromCache.blocking('https://planted.example.test/'), '||planted.example.test^');

  // A damaged cache entry is parsed again.
  const damaged = path.join(dir, 'damaged');
  fs.mkdirSync(damaged);
  fs.writeFileSync(path.join(damaged, entry!), 'not an engine');
  assert.equal((await AdBlocker.load([list], damaged)).blocking('https://ads.example.test/'), '||ads.example.test^');
});

test('when a list file cannot be read, then loading fails, and a later load tries again', async () => {
  const dir = tempDir('adblock-');
  const list = path.join(dir, 'missing.txt');
  await assert.rejects(AdBlocker.load([list], path.join(dir, 'cache')), /ENOENT/);
  fs.writeFileSync(list, LIST);
  assert.equal((await AdBlocker.load([list], path.join(dir, 'cache'))).blocking('https://ads.example.test/'), '||ads.example.test^');
});
