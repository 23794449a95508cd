/** /webhooks: endpoints that receive a project's events, signed (Standard Webhooks); served by the webhooks service. */
import type { Delivery, Endpoint } from '../../../gen/ats/webhooks/v1/webhooks.js';
import { orNull } from '../../../services/common/src/resources.js';
import { page, required } from '../presenters.js';
import * as w from '../webhook-schemas.js';
import type { FromSchema } from '../json-schema.js';
import { route, type RouteContext, type RouteDef } from './route.js';

type WebhookReply = FromSchema<typeof w.webhook>;
type DeliveryReply = FromSchema<typeof w.webhookDelivery>;

const opts = (ctx: RouteContext) => ({ requestId: ctx.requestId });
const ref = (ctx: RouteContext<{ webhookId: string }>) => ({ projectId: ctx.projectId, endpointId: ctx.params.webhookId });

function presentWebhook(e: Endpoint): WebhookReply {
  return {
    id: e.id,
    url: e.url,
    eventTypes: e.eventTypes as WebhookReply['eventTypes'],
    enabled: e.enabled,
    description: e.description,
    disabledReason: orNull(e.disabledReason),
    disabledAt: orNull(e.disabledAt),
    previousSecretExpiresAt: orNull(e.previousSecretExpiresAt),
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
  };
}

function presentDelivery(d: Delivery): DeliveryReply {
  return {
    id: d.id,
    webhookId: d.endpointId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status as DeliveryReply['status'],
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode || null,
    lastError: orNull(d.lastError),
    lastLatencyMs: d.attempts ? d.lastLatencyMs : null,
    lastAttemptAt: orNull(d.lastAttemptAt),
    nextAttemptAt: orNull(d.nextAttemptAt),
    createdAt: d.createdAt,
    deliveredAt: orNull(d.deliveredAt),
  };
}

export function webhookRoutes(): RouteDef[] {
  return [
    route({
      method: 'post',
      path: '/webhooks',
      operationId: 'createWebhook',
      summary: 'Register a webhook endpoint; the reply carries its signing secret, shown only once',
      tag: 'webhooks',
      body: w.createWebhookBody,
      success: { status: 201, schema: w.webhookWithSecret },
      handler: async (ctx) => {
        const b = ctx.body;
        const res = await ctx.clients.webhooks.api.createEndpoint(
          { projectId: ctx.projectId, url: b.url, eventTypes: b.event_types ?? [], description: b.description ?? '', enabled: b.enabled ?? true },
          opts(ctx),
        );
        return { ...presentWebhook(required(res.endpoint, 'endpoint')), secret: res.secret };
      },
    }),
    route({
      method: 'get',
      path: '/webhooks',
      operationId: 'listWebhooks',
      summary: "List the project's webhook endpoints, newest first",
      tag: 'webhooks',
      query: w.pageQuery,
      success: { status: 200, schema: w.webhookList },
      handler: async (ctx) => page(await ctx.clients.webhooks.api.listEndpoints({ projectId: ctx.projectId, limit: ctx.query.limit ?? 50, cursor: ctx.query.cursor ?? '' }, opts(ctx)), presentWebhook),
    }),
    route({
      method: 'get',
      path: '/webhooks/:webhookId',
      operationId: 'getWebhook',
      summary: 'Read a webhook endpoint (never its secret)',
      tag: 'webhooks',
      success: { status: 200, schema: w.webhook },
      errors: [404],
      handler: async (ctx) => presentWebhook(required((await ctx.clients.webhooks.api.getEndpoint(ref(ctx), opts(ctx))).endpoint, 'endpoint')),
    }),
    route({
      method: 'patch',
      path: '/webhooks/:webhookId',
      operationId: 'updateWebhook',
      summary: 'Change a webhook endpoint’s URL, event types, description or enabled state',
      tag: 'webhooks',
      body: w.updateWebhookBody,
      success: { status: 200, schema: w.webhook },
      errors: [404],
      handler: async (ctx) => {
        const b = ctx.body;
        const res = await ctx.clients.webhooks.api.updateEndpoint(
          { ...ref(ctx), url: b.url, eventTypes: b.event_types ?? [], setEventTypes: b.event_types !== undefined, description: b.description, enabled: b.enabled },
          opts(ctx),
        );
        return presentWebhook(required(res.endpoint, 'endpoint'));
      },
    }),
    route({
      method: 'delete',
      path: '/webhooks/:webhookId',
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook endpoint and its pending deliveries (idempotent)',
      tag: 'webhooks',
      success: { status: 204 },
      handler: async (ctx) => {
        await ctx.clients.webhooks.api.deleteEndpoint(ref(ctx), opts(ctx));
        return undefined;
      },
    }),
    route({
      method: 'post',
      path: '/webhooks/:webhookId/rotate-secret',
      operationId: 'rotateWebhookSecret',
      summary: 'Issue a new signing secret (shown once); the previous one still signs for overlap_seconds',
      tag: 'webhooks',
      body: w.rotateWebhookSecretBody,
      success: { status: 200, schema: w.webhookWithSecret },
      errors: [404],
      handler: async (ctx) => {
        const res = await ctx.clients.webhooks.api.rotateSecret({ ...ref(ctx), overlapSeconds: ctx.body.overlap_seconds ?? 86400 }, opts(ctx));
        return { ...presentWebhook(required(res.endpoint, 'endpoint')), secret: res.secret };
      },
    }),
    route({
      method: 'get',
      path: '/webhooks/:webhookId/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: "A webhook endpoint's deliveries, newest first: attempts, status code, latency, error, next retry",
      tag: 'webhooks',
      query: w.pageQuery,
      success: { status: 200, schema: w.webhookDeliveryList },
      errors: [404],
      handler: async (ctx) =>
        page(await ctx.clients.webhooks.api.listDeliveries({ ...ref(ctx), limit: ctx.query.limit ?? 50, cursor: ctx.query.cursor ?? '' }, opts(ctx)), presentDelivery),
    }),
    route({
      method: 'post',
      path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
      operationId: 'redeliverWebhook',
      summary: 'Send a delivery’s event again (a new delivery of the same event id)',
      tag: 'webhooks',
      success: { status: 202, schema: w.webhookDelivery },
      errors: [404],
      handler: async (ctx) =>
        presentDelivery(required((await ctx.clients.webhooks.api.redeliver({ ...ref(ctx), deliveryId: ctx.params.deliveryId }, opts(ctx))).delivery, 'delivery')),
    }),
    route({
      method: 'post',
      path: '/webhooks/:webhookId/test',
      operationId: 'testWebhook',
      summary: 'Send a webhook.test event to the endpoint',
      tag: 'webhooks',
      success: { status: 202, schema: w.webhookDelivery },
      errors: [404],
      handler: async (ctx) => presentDelivery(required((await ctx.clients.webhooks.api.sendTest(ref(ctx), opts(ctx))).delivery, 'delivery')),
    }),
  ];
}
