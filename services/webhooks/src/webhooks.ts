/** The webhooks service's operations: endpoints with their secrets, events in, deliveries out. */
import type { RecordedEvent } from '../../../gen/ats/webhooks/v1/webhooks.js';
import { InvalidArgumentError, NotFoundError } from '../../common/src/errors.js';
import { newId } from '../../common/src/ids.js';
import { isWebhookEventType, WEBHOOK_TEST_EVENT } from '../../common/src/webhook-events.js';
import { newSecret } from './standard-webhooks.js';
import { checkWebhookUrl, type UrlPolicy } from './url-guard.js';
import type { DeliveryRow, EndpointRow, WebhookRepository } from './webhook.repository.js';

export interface WebhooksOptions {
  repo: WebhookRepository;
  policy: UrlPolicy;
  /** Called when deliveries were added (the dispatcher looks at once). */
  onDeliveries(): void;
}

const MAX_URL = 2000;
const MAX_DESCRIPTION = 500;

/** The webhook body of an event: `{id, type, createdAt, data}`. */
export function webhookBody(id: string, type: string, createdAt: string, data: unknown): string {
  return JSON.stringify({ id, type, createdAt, data });
}

export class Webhooks {
  readonly #o: WebhooksOptions;
  constructor(o: WebhooksOptions) {
    this.#o = o;
  }

  async #url(raw: string): Promise<string> {
    if (raw.length > MAX_URL) throw new InvalidArgumentError(`url is longer than ${MAX_URL} characters`);
    return (await checkWebhookUrl(raw, this.#o.policy)).toString();
  }

  #types(types: string[]): string[] {
    const bad = types.filter((t) => !isWebhookEventType(t));
    if (bad.length) throw new InvalidArgumentError(`unknown event types: ${bad.join(', ')}`);
    return [...new Set(types)];
  }

  #description(d: string): string {
    if (d.length > MAX_DESCRIPTION) throw new InvalidArgumentError(`description is longer than ${MAX_DESCRIPTION} characters`);
    return d;
  }

  async create(projectId: string, input: { url: string; eventTypes: string[]; description: string; enabled: boolean }): Promise<{ endpoint: EndpointRow; secret: string }> {
    const secret = newSecret();
    const endpoint = await this.#o.repo.insertEndpoint({
      id: newId('wh'),
      projectId,
      url: await this.#url(input.url),
      eventTypes: this.#types(input.eventTypes),
      enabled: input.enabled,
      description: this.#description(input.description),
      secret,
    });
    return { endpoint, secret };
  }

  async get(projectId: string, id: string): Promise<EndpointRow> {
    const e = await this.#o.repo.endpoint(projectId, id);
    if (!e) throw new NotFoundError('Webhook not found');
    return e;
  }

  list(projectId: string, limit: number, cursor: string) {
    return this.#o.repo.endpoints(projectId, Math.min(Math.max(limit || 50, 1), 200), cursor || undefined);
  }

  async update(projectId: string, id: string, patch: { url?: string | undefined; eventTypes?: string[] | undefined; description?: string | undefined; enabled?: boolean | undefined }): Promise<EndpointRow> {
    await this.get(projectId, id);
    const e = await this.#o.repo.updateEndpoint(projectId, id, {
      ...(patch.url !== undefined ? { url: await this.#url(patch.url) } : {}),
      ...(patch.eventTypes !== undefined ? { eventTypes: this.#types(patch.eventTypes) } : {}),
      ...(patch.description !== undefined ? { description: this.#description(patch.description) } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
    });
    if (!e) throw new NotFoundError('Webhook not found');
    // Deliveries that waited while it was disabled may go now.
    if (patch.enabled) this.#o.onDeliveries();
    return e;
  }

  async delete(projectId: string, id: string): Promise<void> {
    await this.#o.repo.deleteEndpoint(projectId, id);
  }

  async rotate(projectId: string, id: string, overlapSeconds: number): Promise<{ endpoint: EndpointRow; secret: string }> {
    if (overlapSeconds < 0 || overlapSeconds > 7 * 86400) throw new InvalidArgumentError('overlap_seconds must be between 0 and 604800');
    const secret = newSecret();
    const endpoint = await this.#o.repo.rotateSecret(projectId, id, secret, overlapSeconds);
    if (!endpoint) throw new NotFoundError('Webhook not found');
    return { endpoint, secret };
  }

  async deliveries(projectId: string, id: string, limit: number, cursor: string) {
    await this.get(projectId, id);
    return this.#o.repo.deliveries(id, Math.min(Math.max(limit || 50, 1), 200), cursor || undefined);
  }

  /** Queues the delivery's event to its endpoint again, as a new delivery. */
  async redeliver(projectId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow> {
    await this.get(projectId, endpointId);
    const d = await this.#o.repo.delivery(endpointId, deliveryId);
    const event = d && (await this.#o.repo.event(d.eventId));
    if (!event) throw new NotFoundError('Delivery not found');
    const again = await this.#o.repo.addDelivery(endpointId, event);
    this.#o.onDeliveries();
    return again;
  }

  /** Sends a `webhook.test` event to the endpoint (whatever types it subscribed to). */
  async sendTest(projectId: string, endpointId: string): Promise<DeliveryRow> {
    await this.get(projectId, endpointId);
    const id = newId('evt');
    const createdAt = new Date().toISOString();
    const body = webhookBody(id, WEBHOOK_TEST_EVENT, createdAt, { webhookId: endpointId, message: 'A test event from the Agent Task Service' });
    const d = await this.#o.repo.addDelivery(endpointId, { id, projectId, type: WEBHOOK_TEST_EVENT, orderingKey: id, createdAt, body });
    this.#o.onDeliveries();
    return d;
  }

  /** Stores events from the services' outboxes (an id seen before is ignored) and their deliveries. */
  async record(events: RecordedEvent[]): Promise<number> {
    const n = await this.#o.repo.recordEvents(
      [...events]
        .sort((a, b) => a.sequence - b.sequence)
        .map((e) => ({ id: e.id, projectId: e.projectId, type: e.type, orderingKey: e.orderingKey || e.id, createdAt: e.createdAt, body: webhookBody(e.id, e.type, e.createdAt, JSON.parse(e.dataJson || '{}')) })),
    );
    if (n) this.#o.onDeliveries();
    return n;
  }
}
