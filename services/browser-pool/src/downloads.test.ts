/** Downloads are stored from the browser's folder, which the browser (untrusted) writes. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { createLogger } from '../../common/src/logger.js';
import type { BrowserRepository, DownloadRow } from './browser.repository.js';
import { Downloads, type DownloadStore } from './downloads.js';

test('when the browser plants a symlink to a host file in its downloads, then only its real downloads are stored', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dl-'));
  try {
    const secret = path.join(dir, 'signing-secret');
    fs.writeFileSync(secret, 'service secret');
    const downloads = path.join(dir, 'downloads');
    fs.mkdirSync(downloads);
    fs.writeFileSync(path.join(downloads, 'report.csv'), 'a,b\n');
    fs.symlinkSync(secret, path.join(downloads, 'innocent.txt'));
    fs.symlinkSync(dir, path.join(downloads, 'folder'));
    const stored = new Map<string, string>();
    const rows: DownloadRow[] = [];
    const store: DownloadStore = {
      async put(_projectId, key, _type, body) {
        const chunks: Buffer[] = [];
        for await (const c of body) chunks.push(c as Buffer);
        stored.set(key, Buffer.concat(chunks).toString());
      },
      async sign() {
        return 'mem://x';
      },
    };
    const repo = { downloads: async () => rows, putDownload: async (r: DownloadRow) => void rows.push(r) } as unknown as BrowserRepository;
    const d = new Downloads({ repo, store, logger: createLogger('test', 'silent'), ttlSeconds: 60 });
    await d.sync('prj', 'brw_dl', downloads);
    assert.deepEqual(rows.map((r) => r.name), ['report.csv']);
    assert.deepEqual([...stored.values()], ['a,b\n']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
