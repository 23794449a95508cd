/** WebhooksService handlers: proto ↔ domain. */
import type { Handlers } from '../../common/src/grpc.js';
import type { Delivery, Endpoint, WebhooksServiceService } from '../../../gen/ats/webhooks/v1/webhooks.js';
import type { DeliveryRow, EndpointRow } from './webhook.repository.js';
import type { Webhooks } from './webhooks.js';

function endpointOut(e: EndpointRow): Endpoint {
  return {
    id: e.id,
    projectId: e.projectId,
    url: e.url,
    eventTypes: e.eventTypes,
    enabled: e.enabled,
    description: e.description,
    disabledReason: e.disabledReason ?? '',
    disabledAt: e.disabledAt ?? '',
    previousSecretExpiresAt: e.previousSecretExpiresAt && Date.parse(e.previousSecretExpiresAt) > Date.now() ? e.previousSecretExpiresAt : '',
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
  };
}

function deliveryOut(d: DeliveryRow): Delivery {
  return {
    id: d.id,
    endpointId: d.endpointId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode ?? 0,
    lastError: d.lastError ?? '',
    lastLatencyMs: d.lastLatencyMs ?? 0,
    lastAttemptAt: d.lastAttemptAt ?? '',
    nextAttemptAt: d.nextAttemptAt ?? '',
    createdAt: d.createdAt,
    deliveredAt: d.deliveredAt ?? '',
  };
}

export function webhooksHandlers(w: Webhooks): Handlers<typeof WebhooksServiceService> {
  return {
    async createEndpoint(req) {
      const { endpoint, secret } = await w.create(req.projectId, { url: req.url, eventTypes: req.eventTypes, description: req.description, enabled: req.enabled });
      return { endpoint: endpointOut(endpoint), secret };
    },
    async getEndpoint(req) {
      return { endpoint: endpointOut(await w.get(req.projectId, req.endpointId)) };
    },
    async listEndpoints(req) {
      const page = await w.list(req.projectId, req.limit, req.cursor);
      return { items: page.items.map(endpointOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async updateEndpoint(req) {
      const e = await w.update(req.projectId, req.endpointId, {
        url: req.url,
        eventTypes: req.setEventTypes ? req.eventTypes : undefined,
        description: req.description,
        enabled: req.enabled,
      });
      return { endpoint: endpointOut(e) };
    },
    async deleteEndpoint(req) {
      await w.delete(req.projectId, req.endpointId);
      return {};
    },
    async rotateSecret(req) {
      const { endpoint, secret } = await w.rotate(req.projectId, req.endpointId, req.overlapSeconds);
      return { endpoint: endpointOut(endpoint), secret };
    },
    async listDeliveries(req) {
      const page = await w.deliveries(req.projectId, req.endpointId, req.limit, req.cursor);
      return { items: page.items.map(deliveryOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async redeliver(req) {
      return { delivery: deliveryOut(await w.redeliver(req.projectId, req.endpointId, req.deliveryId)) };
    },
    async sendTest(req) {
      return { delivery: deliveryOut(await w.sendTest(req.projectId, req.endpointId)) };
    },
    async recordEvents(req) {
      return { recorded: await w.record(req.events) };
    },
  };
}
