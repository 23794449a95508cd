/** Browsers through the API and the length of their recordings, as a user measures it (ffprobe on the downloaded MP4). */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { StackFixture } from './stack-fixture.js';
import { until } from './until.js';

export interface BrowserRecord {
  id: string;
  status: string;
  liveViewUrl: string | null;
  createdAt: string;
  stoppedAt: string | null;
}

/** A tick (0.1 s) either side, and the moments between the pool's records and the recorder's. */
export const TOLERANCE_S = 0.3;

/** How long a stopped browser lived by the pool's records. */
export const wallSeconds = (b: BrowserRecord) => (Date.parse(b.stoppedAt!) - Date.parse(b.createdAt)) / 1000;

/** The browser calls of one project's key, and its recordings downloaded into `videos`. */
export function browsersOf(f: StackFixture, key: () => string, videos: string) {
  return {
    async create(): Promise<BrowserRecord> {
      const res = await f.api('/api/v1/browsers', { method: 'POST', key: key(), headers: { 'content-type': 'application/json' }, body: '{}' });
      // A failed create's cause is in the pool's log, not in the answer (which names no internals): its last errors go with the failure.
      const why = res.status >= 500 ? `\n${f.logs('browser-pool').split('\n').filter((l) => /"level":"(error|fatal)"/.test(l)).slice(-5).join('\n')}` : '';
      assert.equal(res.status, 201, `${await res.clone().text()}${why}`);
      return (await res.json()) as BrowserRecord;
    },

    async stop(id: string): Promise<BrowserRecord> {
      const res = await f.api(`/api/v1/browsers/${id}/stop`, { method: 'POST', key: key() });
      assert.equal(res.status, 200);
      return (await res.json()) as BrowserRecord;
    },

    async get(id: string): Promise<BrowserRecord> {
      const res = await f.api(`/api/v1/browsers/${id}`, { key: key() });
      assert.equal(res.status, 200);
      return (await res.json()) as BrowserRecord;
    },

    /** Polls GET /recording through 409 (being made) until the MP4 link comes; returns ffprobe's length of the video. */
    async recordedSeconds(id: string, timeoutMs = 60000): Promise<number> {
      const url = await until(
        async () => {
          const res = await f.api(`/api/v1/browsers/${id}/recording`, { key: key() });
          if (res.status === 200) return ((await res.json()) as { url: string }).url;
          assert.equal(res.status, 409, `${id}: a stopped browser's recording is being made or ready (got ${res.status})\n${f.logs('live-view')}`);
          return undefined;
        },
        { timeoutMs, intervalMs: 250, what: `the recording of ${id}` },
      );
      const file = path.join(videos, `${id}.mp4`);
      fs.writeFileSync(file, Buffer.from(await (await fetch(url)).arrayBuffer()));
      const out = spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file], { encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      return Number(out.stdout.trim());
    },
  };
}
