/** Browser lifecycle notifications on NATS (the `browserLifecycle` topic of the contract). */
import type { BrowserLifecycleEvent } from '../../../gen/ats/common/v1/common.js';
import { agentEnum } from '../../common/src/agent-name.js';
import type { NatsConnection } from '../../common/src/bus.js';
import type { Logger } from '../../common/src/logger.js';
import { browserLifecycle, publish, type BrowserLifecycleKind } from '../../common/src/subjects.js';
import type { BrowserRow } from './browser.repository.js';

/** Where lifecycle events go (NATS in production, a list in tests). */
export interface BrowserEvents {
  publish(kind: BrowserLifecycleKind, row: BrowserRow): void;
}

/** The payload of a lifecycle event. */
export function browserEventPayload(row: BrowserRow, kind: BrowserLifecycleKind, now = new Date()): BrowserLifecycleEvent {
  return {
    browserId: row.id,
    projectId: row.projectId,
    sessionId: row.sessionId ?? undefined,
    runId: row.runId ?? undefined,
    agent: agentEnum(row.agent),
    profileId: row.profileId ?? undefined,
    reason: kind === 'stopped' ? (row.stopReason ?? 'user') : undefined,
    ts: (kind === 'stopped' && row.stoppedAt ? new Date(row.stoppedAt) : now).toISOString(),
  };
}

/** Publishes on core NATS; the database stays the source of truth, so a lost event is only a late notice. */
export function natsBrowserEvents(nc: NatsConnection, logger: Logger): BrowserEvents {
  return {
    publish(kind, row) {
      try {
        publish(nc, browserLifecycle, { browserId: row.id, kind }, browserEventPayload(row, kind));
      } catch (err) {
        logger.warn({ err, browserId: row.id, kind }, 'browser event not published');
      }
    },
  };
}
