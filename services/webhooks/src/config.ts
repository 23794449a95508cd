import { bool, commonFields, DEFAULT_PORTS, type Field, FieldProblem, grpcFields, int, loadConfig } from '../../common/src/config.js';

const ports: Field<number[]> = {
  env: 'WEBHOOK_DENIED_PORTS',
  describe: 'Ports no webhook URL may name even when loopback receivers are allowed (the services’ own ports; comma-separated)',
  parse(raw) {
    const out = (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean).map(Number);
    if (out.some((p) => !Number.isInteger(p) || p < 1 || p > 65535)) throw new FieldProblem('WEBHOOK_DENIED_PORTS must list ports 1-65535, comma-separated');
    return out;
  },
};

export const webhooksConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.webhooks),
  allowLoopback: bool('WEBHOOK_ALLOW_LOOPBACK', { default: false, describe: 'Allow receivers on loopback addresses (local development: make up sets it); private, link-local and this host’s other addresses stay refused' }),
  deniedPorts: ports,
  timeoutMs: int('WEBHOOK_TIMEOUT_MS', { default: 10000, min: 100, max: 60000, describe: 'One delivery attempt’s bound, connect to response' }),
  retryBaseMs: int('WEBHOOK_RETRY_BASE_MS', { default: 5000, min: 10, max: 3600000, describe: 'Pause after the first failed attempt; it doubles (with jitter) after each' }),
  retryMaxMs: int('WEBHOOK_RETRY_MAX_MS', { default: 3600000, min: 10, max: 86400000, describe: 'Longest pause between attempts' }),
  retryWindowMs: int('WEBHOOK_RETRY_WINDOW_MS', { default: 3 * 86400000, min: 100, max: 30 * 86400000, describe: 'How long a delivery is retried before it is given up' }),
  disableAfterMs: int('WEBHOOK_DISABLE_AFTER_MS', { default: 5 * 86400000, min: 100, max: 60 * 86400000, describe: 'An endpoint failing every attempt for this long is disabled (with a note)' }),
  pollMs: int('WEBHOOK_POLL_MS', { default: 1000, min: 10, max: 60000, describe: 'How often due retries are looked for (new events wake the dispatcher at once)' }),
  concurrency: int('WEBHOOK_CONCURRENCY', { default: 16, min: 1, max: 512, describe: 'Deliveries this process makes at once' }),
  rotationOverlapSeconds: int('WEBHOOK_ROTATION_OVERLAP_SECONDS', { default: 86400, min: 0, max: 7 * 86400, describe: 'Default time a rotated-out secret still signs' }),
};

export type WebhooksConfig = ReturnType<typeof loadWebhooksConfig>;

/** The webhooks service's configuration from the environment. */
export function loadWebhooksConfig(env: Record<string, string | undefined> = process.env) {
  return loadConfig(webhooksConfigSpec, env);
}
