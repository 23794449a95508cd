/**
 * JSON Schemas of the webhook API (endpoints, deliveries) and of the webhook payloads the
 * OpenAPI document lists under `webhooks`; beside schemas.ts, from the same builders.
 */
import { WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT } from '../../services/common/src/webhook-events.js';
import { bool, int, list, nullable, obj, reply, str, type JsonSchema } from './json-schema.js';
import * as s from './schemas.js';

const ts = str({ format: 'date-time', description: 'ISO-8601 UTC' });
const eventTypes = list(str({ enum: WEBHOOK_EVENT_TYPES }), { maxItems: WEBHOOK_EVENT_TYPES.length, description: 'The event types sent; empty or absent = every type' });
const url = str({ minLength: 1, maxLength: 2000, description: 'http(s) URL events are POSTed to; it must resolve to public addresses only' });
const description = str({ maxLength: 500 });
export const ROTATION_OVERLAP_MAX_SECONDS = 7 * 86400;
export const pageQuery = s.pageQuery;

export const createWebhookBody = obj({ url, event_types: eventTypes, description, enabled: bool({ description: 'Default true' }) }, ['url']);
export const updateWebhookBody = obj({ url, event_types: eventTypes, description, enabled: bool({ description: 'true clears the note of why it was disabled' }) }, [], { minProperties: 1 });
export const rotateWebhookSecretBody = obj({
  overlap_seconds: int({ minimum: 0, maximum: ROTATION_OVERLAP_MAX_SECONDS, description: 'How long the previous secret still signs (a second signature in webhook-signature); default 86400' }),
});

const webhookFields = {
  id: str({ description: 'Id (prefix wh_)' }),
  url: str(),
  eventTypes: list(str({ enum: WEBHOOK_EVENT_TYPES })),
  enabled: bool(),
  description: str(),
  disabledReason: nullable(str({ description: 'Why it was disabled (410 Gone from the receiver, or failing for days); null while enabled' })),
  disabledAt: nullable(ts),
  previousSecretExpiresAt: nullable(ts),
  createdAt: ts,
  updatedAt: ts,
};
export const webhook = reply(webhookFields);
export const webhookWithSecret = reply({
  ...webhookFields,
  secret: str({ description: 'The signing secret (whsec_…), shown only in this reply: verify every delivery with it (Standard Webhooks)' }),
});
export const webhookList = reply({ items: list(webhook), nextCursor: nullable(str()), hasMore: bool() });

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export const webhookDelivery = reply({
  id: str({ description: 'Id (prefix dlv_)' }),
  webhookId: str(),
  eventId: str({ description: 'The event id: the webhook-id header and the body’s id, the same on every attempt' }),
  eventType: str(),
  status: str({ enum: DELIVERY_STATUSES, description: 'pending (being tried), succeeded (2xx) or failed (410, or retries ran out)' }),
  attempts: int(),
  lastStatusCode: nullable(int()),
  lastError: nullable(str({ description: 'Why the last attempt failed; at most an excerpt of the answer' })),
  lastLatencyMs: nullable(int()),
  lastAttemptAt: nullable(ts),
  nextAttemptAt: nullable(ts),
  createdAt: ts,
  deliveredAt: nullable(ts),
});
export const webhookDeliveryList = reply({ items: list(webhookDelivery), nextCursor: nullable(str()), hasMore: bool() });

/** A webhook body: `{id, type, createdAt, data}`, `data` the resource as the REST API returns it. */
const payload = (type: string, data: JsonSchema, about: string) => ({
  ...reply({ id: str({ description: 'Event id (evt_…), also the webhook-id header' }), type: str({ const: type }), createdAt: ts, data }),
  description: about,
});
export const runEventPayload = reply({ id: str(), type: str({ enum: WEBHOOK_EVENT_TYPES.filter((t) => t.startsWith('run.')) }), createdAt: ts, data: s.run });
export const browserEventPayload = reply({ id: str(), type: str({ enum: ['browser.created', 'browser.stopped', 'recording.ready'] }), createdAt: ts, data: s.browser });
export const fileEventPayload = reply({ id: str(), type: str({ const: 'file.created' }), createdAt: ts, data: s.fileItem });
export const testEventPayload = payload(WEBHOOK_TEST_EVENT, reply({ webhookId: str(), message: str() }), 'Sent by POST /webhooks/{webhookId}/test');

/** Each event type with its payload schema and what it reports (the OpenAPI `webhooks` section). */
export const WEBHOOK_PAYLOADS: Record<string, { schema: JsonSchema; summary: string }> = {
  'run.queued': { schema: runEventPayload, summary: 'A run was created (queued)' },
  'run.started': { schema: runEventPayload, summary: 'A run started working' },
  'run.completed': { schema: runEventPayload, summary: 'A run completed (its result is in data.result)' },
  'run.failed': { schema: runEventPayload, summary: 'A run failed (data.error says why)' },
  'run.stopped': { schema: runEventPayload, summary: 'A run was stopped' },
  'browser.created': { schema: browserEventPayload, summary: 'A browser started' },
  'browser.stopped': { schema: browserEventPayload, summary: 'A browser stopped' },
  'recording.ready': { schema: browserEventPayload, summary: 'A browser’s recording can be fetched (data.recordingUrl)' },
  'file.created': { schema: fileEventPayload, summary: 'A run wrote an output file' },
  [WEBHOOK_TEST_EVENT]: { schema: testEventPayload, summary: 'A test ping' },
};
