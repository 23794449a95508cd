/** The events a webhook endpoint may subscribe to (the services record them; the webhooks service delivers them). */
export const WEBHOOK_EVENT_TYPES = [
  'run.queued',
  'run.started',
  'run.completed',
  'run.failed',
  'run.stopped',
  'browser.created',
  'browser.stopped',
  'file.created',
  'recording.ready',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The event a test ping sends (to one endpoint, whatever it subscribed to). */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

export function isWebhookEventType(t: string): t is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(t);
}
