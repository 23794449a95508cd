/** Webhook endpoints: URLs that receive the project's events, signed with their secret (verify with verifyWebhook). */
import type { CamelKeys } from '../casing.js';
import { toSnake } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type {
  CreateWebhookRequest,
  RotateWebhookSecretRequest,
  UpdateWebhookRequest,
  Webhook,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookList,
  WebhookWithSecret,
} from '../models.js';
import { PageIterator } from '../pagination.js';
import { requestOptions, seg } from './shared.js';
import type { PageOptions } from './workspaces.js';

/** The project's webhook endpoints and their deliveries. */
export class Webhooks {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Registers an endpoint for `eventTypes` (none: every type). Its `secret` is in this reply only: store it now. */
  create(options: CamelKeys<CreateWebhookRequest> & RequestOptions): Promise<WebhookWithSecret> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<WebhookWithSecret>('POST', '/webhooks', { signal, timeoutMs, maxRetries, body: toSnake(request) as CreateWebhookRequest });
  }

  /** Every webhook, newest first, across pages. */
  list(options: PageOptions = {}): PageIterator<Webhook> {
    return new PageIterator<Webhook>(async (cursor) => {
      const page = await this.#core.request<WebhookList>('GET', '/webhooks', { ...requestOptions(options), idempotent: true, query: { limit: options.limit, cursor } });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }

  /** One webhook (never its secret). */
  get(webhookId: string, options: RequestOptions = {}): Promise<Webhook> {
    return this.#core.request<Webhook>('GET', `/webhooks/${seg(webhookId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** Changes what is given; `enabled: true` re-enables a webhook the service disabled. */
  update(webhookId: string, options: CamelKeys<UpdateWebhookRequest> & RequestOptions): Promise<Webhook> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    // Setting the same values twice gives the same webhook, so a retry after a lost answer is safe.
    return this.#core.request<Webhook>('PATCH', `/webhooks/${seg(webhookId)}`, { signal, timeoutMs, maxRetries, idempotent: true, body: toSnake(request) as UpdateWebhookRequest });
  }

  /** Deletes a webhook and its pending deliveries (deleting one already gone is fine). */
  async delete(webhookId: string, options: RequestOptions = {}): Promise<void> {
    await this.#core.request<undefined>('DELETE', `/webhooks/${seg(webhookId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** A new secret (in this reply only); the previous one still signs for `overlapSeconds` (default a day). */
  rotateSecret(webhookId: string, options: CamelKeys<RotateWebhookSecretRequest> & RequestOptions = {}): Promise<WebhookWithSecret> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    const body = toSnake(request) as RotateWebhookSecretRequest;
    return this.#core.request<WebhookWithSecret>('POST', `/webhooks/${seg(webhookId)}/rotate-secret`, { signal, timeoutMs, maxRetries, body });
  }

  /** A webhook's deliveries, newest first, across pages: status, attempts, last status code, latency, error, next retry. */
  deliveries(webhookId: string, options: PageOptions = {}): PageIterator<WebhookDelivery> {
    return new PageIterator<WebhookDelivery>(async (cursor) => {
      const path = `/webhooks/${seg(webhookId)}/deliveries`;
      const page = await this.#core.request<WebhookDeliveryList>('GET', path, { ...requestOptions(options), idempotent: true, query: { limit: options.limit, cursor } });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }

  /** Sends a delivery's event again: a new delivery of the same event id. */
  redeliver(webhookId: string, deliveryId: string, options: RequestOptions = {}): Promise<WebhookDelivery> {
    return this.#core.request<WebhookDelivery>('POST', `/webhooks/${seg(webhookId)}/deliveries/${seg(deliveryId)}/redeliver`, requestOptions(options));
  }

  /** Sends a webhook.test event to the endpoint; its delivery is among `deliveries(webhookId)`. */
  test(webhookId: string, options: RequestOptions = {}): Promise<WebhookDelivery> {
    return this.#core.request<WebhookDelivery>('POST', `/webhooks/${seg(webhookId)}/test`, requestOptions(options));
  }
}
