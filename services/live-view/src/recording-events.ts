/**
 * The `recording.ready` webhook event: its `data` is the browser as the REST API returns it, with
 * a recording link as GET /browsers/{id} gives one (valid RECORDING_URL_TTL_SECONDS; a receiver
 * that comes back later reads the browser for a fresh one). Like the browser.* events, it carries
 * no way into the browser (no CDP or live view link).
 */
import { recordOutboxEvent } from '../../common/src/outbox.js';
import { browserResource } from '../../common/src/resources.js';
import type { Logger } from '../../common/src/logger.js';
import type { FrameSource } from './pool-client.js';
import type { ReadyWrite, RecordingRow } from './recording.repository.js';
import { recordingFileName, type RecordingStore } from './recording-store.js';

export interface RecordingEventsOptions {
  pool: Pick<FrameSource, 'getBrowser'>;
  store: Pick<RecordingStore, 'link'>;
  recordingUrlTtlSeconds: number;
  logger: Logger;
}

/** Prepares the event of a recording stored at `objectKey`, for the transaction that marks it ready. */
export function recordingReadyAnnouncer(o: RecordingEventsOptions): (row: RecordingRow, objectKey: string) => Promise<ReadyWrite | undefined> {
  return async (row, objectKey) => {
    const browser = await o.pool.getBrowser(row.projectId, row.browserId);
    if (!browser) {
      // The pool no longer knows it: there is no browser object to send (nor one to GET).
      o.logger.warn({ browserId: row.browserId }, 'recording of a browser the pool does not know; no recording.ready event');
      return undefined;
    }
    const link = await o.store.link(row.projectId, objectKey, o.recordingUrlTtlSeconds, recordingFileName(row.browserId));
    const data = browserResource({ ...browser, cdpUrl: '', liveViewUrl: '' }, link.url);
    return (trx) => recordOutboxEvent(trx, { projectId: row.projectId, type: 'recording.ready', orderingKey: row.browserId, data });
  };
}
