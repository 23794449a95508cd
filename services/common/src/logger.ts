/** pino logger with the service name on every line and secrets redacted. */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** Paths whose values never reach a log line. */
export const REDACT_PATHS = [
  'apiKey', '*.apiKey', 'key', '*.key', 'token', '*.token', 'secret', '*.secret', 'password', '*.password',
  'authorization', '*.authorization', 'signingSecret', '*.signingSecret', 'bootstrapApiKey', '*.bootstrapApiKey',
  'internalToken', '*.internalToken', 'natsToken', '*.natsToken',
  'databaseUrl', '*.databaseUrl', 'uploadUrl', '*.uploadUrl', 'downloadUrl', '*.downloadUrl', 'upload_url', '*.upload_url',
  'cdpUrl', '*.cdpUrl', 'liveViewUrl', '*.liveViewUrl', 'url', '*.url',
  'req.headers["x-service-api-key"]', 'headers["x-service-api-key"]', 'req.headers.authorization', 'req.headers.cookie',
];

/** Creates the root logger of a service. */
export function createLogger(service: string, level = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/** Strips the query string (tokens, signatures) from a URL or path before it is logged. */
export function redactUrl(u: string): string {
  const i = u.indexOf('?');
  return i === -1 ? u : `${u.slice(0, i)}?[redacted]`;
}
