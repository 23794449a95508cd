/** What a service that records webhook events runs: its outbox relay, sending to the webhooks service. */
import { createServiceClient, type InternalToken } from '../../../common/src/grpc.js';
import type { Knex } from '../../../common/src/db.js';
import type { Logger } from '../../../common/src/logger.js';
import { OutboxRelay } from '../../../common/src/outbox.js';
import { WebhooksServiceService } from '../../../../gen/ats/webhooks/v1/webhooks.js';

/** Starts the relay of `service`'s outbox to the webhooks service at `webhooksAddr`; stop it before the database. */
export function startWebhookRelay(o: { service: string; knex: Knex; driver: 'pg' | 'pglite'; webhooksAddr: string; outboxPollMs: number; grpcDeadlineMs: number; token: InternalToken; logger: Logger }): { stop(): Promise<void> } {
  const client = createServiceClient(WebhooksServiceService, o.webhooksAddr, o.grpcDeadlineMs, o.token);
  const relay = new OutboxRelay({
    knex: o.knex,
    driver: o.driver,
    service: o.service,
    logger: o.logger,
    pollMs: o.outboxPollMs,
    send: async (events) => void (await client.api.recordEvents({ events })),
  });
  relay.start();
  return {
    async stop() {
      await relay.stop();
      client.close();
    },
  };
}
