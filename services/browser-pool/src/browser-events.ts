/** Browser lifecycle notifications on NATS: `ats.browser.<id>.started` and `.stopped` (JSON). */
import type { NatsConnection } from '../../common/src/bus.js';
import type { Logger } from '../../common/src/logger.js';
import type { BrowserRow } from './browser.repository.js';

/** Body of `ats.browser.<id>.started|stopped`. */
export interface BrowserEventPayload {
  browserId: string;
  projectId: string;
  sessionId: string | null;
  runId: string | null;
  agent: string | null;
  profileId: string | null;
  /** Why it stopped (`user`, `timeout`, `idle`, `shutdown`, `crashed`, …); only on `stopped`. */
  reason?: string;
  ts: string;
}

/** Where lifecycle events go (NATS in production, a list in tests). */
export interface BrowserEvents {
  publish(kind: 'started' | 'stopped', row: BrowserRow): void;
}

/** The JSON body of a lifecycle event. */
export function browserEventPayload(row: BrowserRow, kind: 'started' | 'stopped', now = new Date()): BrowserEventPayload {
  const p: BrowserEventPayload = {
    browserId: row.id,
    projectId: row.projectId,
    sessionId: row.sessionId,
    runId: row.runId,
    agent: row.agent,
    profileId: row.profileId,
    ts: (kind === 'stopped' && row.stoppedAt ? new Date(row.stoppedAt) : now).toISOString(),
  };
  if (kind === 'stopped') p.reason = row.stopReason ?? 'user';
  return p;
}

/** Publishes on core NATS; the database stays the source of truth, so a lost event is only a late notice. */
export function natsBrowserEvents(nc: NatsConnection, logger: Logger): BrowserEvents {
  return {
    publish(kind, row) {
      try {
        nc.publish(`ats.browser.${row.id}.${kind}`, JSON.stringify(browserEventPayload(row, kind)));
      } catch (err) {
        logger.warn({ err, browserId: row.id, kind }, 'browser event not published');
      }
    },
  };
}
