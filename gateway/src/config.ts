import { addressFields, commonFields, grpcClientFields, int, loadConfig, optionalStr, port, str } from '../../services/common/src/config.js';

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
};

/** The gateway's configuration from the environment. */
export function loadGatewayConfig(env: Record<string, string | undefined> = process.env) {
  return loadConfig(gatewayConfigSpec, env);
}
