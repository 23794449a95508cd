import { addressFields, commonFields, grpcClientFields, int, loadConfig, optionalStr, optionalUrl, port, str } from '../../services/common/src/config.js';

export const gatewayConfigSpec = {
  ...commonFields,
  ...grpcClientFields,
  ...addressFields,
  host: str('HOST', { default: '0.0.0.0', describe: 'Interface the gateway listens on' }),
  port: port('PORT', { default: 8080, describe: 'Gateway HTTP port' }),
  bodyLimitBytes: int('BODY_LIMIT_BYTES', { default: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024, describe: 'Largest accepted JSON body' }),
  bootstrapApiKey: optionalStr('BOOTSTRAP_API_KEY', { minLength: 20, describe: 'A key registered (hashed) at start' }),
  bootstrapProject: str('BOOTSTRAP_PROJECT', { default: 'default', describe: 'Project of BOOTSTRAP_API_KEY' }),
  authCacheMs: int('AUTH_CACHE_MS', { default: 5000, min: 0, max: 300000, describe: 'How long a key lookup is cached' }),
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
