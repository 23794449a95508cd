import { addressFields, commonFields, FieldProblem, grpcClientFields, int, loadConfig, optionalStr, optionalUrl, port, str, type Field } from '../../services/common/src/config.js';

/** A comma-separated list of web origins (`scheme://host[:port]`, nothing after), each exactly as a browser sends it. */
function originList(env: string, describe: string): Field<string[]> {
  return {
    env,
    describe,
    parse(raw) {
      const items = (raw ?? '').split(',').map((x) => x.trim()).filter(Boolean);
      for (const item of items) {
        let u: URL | undefined;
        try {
          u = new URL(item);
        } catch {
          u = undefined;
        }
        // A wildcard would hand every site a key's reach: the list names origins one by one.
        if (!u || !['http:', 'https:'].includes(u.protocol) || u.origin !== item) {
          throw new FieldProblem(`${env} must list origins like https://app.example.com (scheme, host, optional port; no path or trailing slash), got ${JSON.stringify(item)}`);
        }
      }
      return items;
    },
  };
}

export const gatewayConfigSpec = {
  ...commonFields,
  ...grpcClientFields,
  ...addressFields,
  host: str('HOST', { default: '0.0.0.0', describe: 'Interface the gateway listens on' }),
  port: port('PORT', { default: 8080, describe: 'Gateway HTTP port' }),
  bodyLimitBytes: int('BODY_LIMIT_BYTES', { default: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024, describe: 'Largest accepted JSON body' }),
  bootstrapApiKey: optionalStr('BOOTSTRAP_API_KEY', { minLength: 20, describe: 'A key registered (hashed) at start' }),
  bootstrapProject: str('BOOTSTRAP_PROJECT', { default: 'default', describe: 'Project of BOOTSTRAP_API_KEY' }),
  corsAllowedOrigins: originList('CORS_ALLOWED_ORIGINS', 'Web origins allowed to call the API from a browser, comma-separated (none by default)'),
  // Token buckets per API key, shared by every replica (in the database); 0 turns a limit off.
  rateLimitPerSecond: int('RATE_LIMIT_PER_SECOND', { default: 20, min: 0, max: 100000, describe: 'Requests per second per API key (sustained); 0 = no limit' }),
  rateLimitBurst: int('RATE_LIMIT_BURST', { default: 40, min: 1, max: 100000, describe: 'Requests per API key allowed at once above the sustained rate' }),
  rateLimitCreatesPerMinute: int('RATE_LIMIT_CREATES_PER_MINUTE', { default: 60, min: 0, max: 100000, describe: 'POST requests (creates and actions) per minute per API key; 0 = no limit' }),
  idempotencyRetentionSeconds: int('IDEMPOTENCY_RETENTION_SECONDS', { default: 86400, min: 60, max: 30 * 86400, describe: 'How long an Idempotency-Key and its response are kept' }),
  idempotencyWaitMs: int('IDEMPOTENCY_WAIT_MS', { default: 10000, min: 0, max: 120000, describe: 'How long a retry waits for the first request with its key to finish before a 409' }),
  idempotencyLockSeconds: int('IDEMPOTENCY_LOCK_SECONDS', { default: 60, min: 5, max: 3600, describe: 'After how long an unfinished first request (its gateway died) may be redone by a retry' }),
  dashboardDir: str('DASHBOARD_DIR', { default: 'dashboard/dist', describe: 'The built dashboard served at / (relative to the working directory)' }),
  // The dashboard's Content-Security-Policy names these hosts: it embeds live views and shows
  // screenshots, recordings and uploads through presigned file links. Defaults as those services'.
  liveViewBaseUrl: optionalUrl('LIVE_VIEW_BASE_URL', ['http', 'https'], { describe: 'Public base URL of live views (allowed in the dashboard frame-src)' }),
  filesPublicUrl: optionalUrl('FILES_PUBLIC_URL', ['http', 'https'], { describe: 'Base URL of presigned file links (allowed in the dashboard img-src, media-src, connect-src)' }),
};

/** The gateway's configuration from the environment. */
export function loadGatewayConfig(env: Record<string, string | undefined> = process.env) {
  const c = loadConfig(gatewayConfigSpec, env);
  return { ...c, liveViewBaseUrl: c.liveViewBaseUrl ?? 'http://localhost:8082', filesPublicUrl: c.filesPublicUrl ?? 'http://localhost:8081' };
}
