import path from 'node:path';
import {
  instanceId,
  instanceIdProblem,
  addressFields,
  bool,
  ConfigError,
  commonFields,
  grpcClientFields,
  grpcFields,
  int,
  loadConfig,
  natsFields,
  outboxFields,
  oneOf,
  optionalStr,
  optionalUrl,
  port,
  str,
  DEFAULT_PORTS,
} from '../../common/src/config.js';

export const liveViewConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.liveView),
  ...natsFields,
  ...grpcClientFields,
  ...outboxFields,
  browserPoolAddr: addressFields.browserPoolAddr,
  fileStorageAddr: addressFields.fileStorageAddr,
  httpHost: str('LIVE_VIEW_HTTP_HOST', { default: '0.0.0.0', describe: 'Interface of the live view page and WebSocket' }),
  httpPort: port('LIVE_VIEW_HTTP_PORT', { default: 8082, describe: 'Port of the live view page and WebSocket' }),
  baseUrl: optionalUrl('LIVE_VIEW_BASE_URL', ['http', 'https'], { describe: 'Public base URL of live views ({live_view_host})' }),
  signingSecret: optionalStr('SIGNING_SECRET', { minLength: 32, describe: 'HMAC secret of live view tokens' }),
  tokenTtlSeconds: int('LIVE_VIEW_TOKEN_TTL_SECONDS', { default: 6 * 3600, min: 60, max: 7 * 86400, describe: 'Default lifetime of a live view link' }),
  frameAncestors: str('LIVE_VIEW_FRAME_ANCESTORS', { default: '*', describe: "CSP frame-ancestors of the live view page: who may embed it ('*' = anyone, 'none' = nobody)" }),
  maxViewerFps: int('LIVE_VIEW_MAX_FPS', { default: 30, min: 1, max: 60, describe: 'Most frames per second sent to one viewer' }),
  maxUnackedFrames: int('LIVE_VIEW_MAX_UNACKED_FRAMES', { default: 2, min: 1, max: 16, describe: 'Frames a viewer may have in flight; a slower viewer skips to the newest frame' }),
  feedLingerMs: int('LIVE_VIEW_FEED_LINGER_MS', { default: 3000, min: 0, max: 600000, describe: 'How long a browser’s frame feed stays open after its last viewer left (page reloads)' }),
  maxViewersPerBrowser: int('LIVE_VIEW_MAX_VIEWERS_PER_BROWSER', { default: 50, min: 1, max: 10000, describe: 'Viewers of one browser at once' }),
  recordingEnabled: bool('RECORDING_ENABLED', { default: true, describe: 'Record every browser to MP4' }),
  recordingFps: int('RECORDING_FPS', { default: 10, min: 1, max: 30, describe: 'Most frames per second of recordings (only changes are encoded)' }),
  recordingMaxWidth: int('RECORDING_MAX_WIDTH', { default: 1280, min: 160, max: 3840, describe: 'Recordings are scaled down to at most this width' }),
  recordingMaxHeight: int('RECORDING_MAX_HEIGHT', { default: 1280, min: 120, max: 2160, describe: 'Recordings are scaled down to at most this height' }),
  recordingCrf: int('RECORDING_CRF', { default: 30, min: 0, max: 51, describe: 'x264 constant rate factor (higher = smaller, blurrier)' }),
  recordingPreset: oneOf('RECORDING_PRESET', ['ultrafast', 'superfast', 'veryfast', 'faster', 'fast', 'medium'] as const, { default: 'superfast', describe: 'x264 preset (faster = less CPU, larger files)' }),
  recordingDir: optionalStr('RECORDING_DIR', { describe: 'Where recordings in progress live; default DATA_DIR/live-view/recordings' }),
  recordingReconcileSeconds: int('RECORDING_RECONCILE_SECONDS', { default: 5, min: 0, max: 3600, describe: 'How often the browser pool is asked for browsers to record that no event told of (0: only at start)' }),
  recordingLookbackHours: int('RECORDING_LOOKBACK_HOURS', { default: 24, min: 0, max: 24 * 30, describe: 'At start, browsers stopped this recently that nobody recorded get a recording (a still picture)' }),
  recordingUrlTtlSeconds: int('RECORDING_URL_TTL_SECONDS', { default: 3600, min: 60, max: 7 * 86400, describe: 'Lifetime of a recording download link' }),
  recordingStartConcurrency: int('RECORDING_START_CONCURRENCY', { default: 4, min: 1, max: 256, describe: 'Recordings started at once; a burst of browsers waits its turn (their videos still begin at each browser\'s creation)' }),
  spawnOnLoop: bool('LIVE_VIEW_SPAWN_ON_LOOP', { default: false, describe: 'Start ffmpeg on the event loop instead of its worker thread (the pre-worker baseline, for benchmarks only: it stalls gRPC answers under bursts)' }),
  recordingFinalizeConcurrency: int('RECORDING_FINALIZE_CONCURRENCY', { default: 2, min: 1, max: 64, describe: 'Recordings finalised (concatenated and uploaded) at once' }),
  ffmpegPath: str('FFMPEG_PATH', { default: 'ffmpeg', describe: 'ffmpeg executable' }),
  ffprobePath: str('FFPROBE_PATH', { default: 'ffprobe', describe: 'ffprobe executable' }),
  instanceId: instanceId('LIVE_VIEW_INSTANCE_ID', 'Names this process (its leases on recordings and its scratch folder); unique among live replicas, e.g. the pod name. A process that starts beside a live one of the same id refuses to start'),
  recordingLeaseMs: int('RECORDING_LEASE_MS', { default: 20000, min: 1000, max: 600000, describe: 'A recording whose holder stops renewing its lease this long is taken over by another replica' }),
  recordingRenewMs: int('RECORDING_RENEW_MS', { default: 5000, min: 100, max: 300000, describe: 'How often a replica renews its leases and looks for recordings to take over (at most half the lease)' }),
  recordingPartMs: int('RECORDING_PART_MS', { default: 10000, min: 500, max: 600000, describe: 'Recordings are stored in parts this long as they go: what a takeover can lose' }),
};

export type LiveViewConfig = ReturnType<typeof loadLiveViewConfig>;

/** The live-view service's configuration from the environment. */
export function loadLiveViewConfig(env: Record<string, string | undefined> = process.env) {
  const c = loadConfig(liveViewConfigSpec, env);
  // A CSP source list goes into a header as is: no directive separators, no line breaks.
  if (!/^[\x21-\x7e ]+$/.test(c.frameAncestors) || /[;,]/.test(c.frameAncestors)) {
    throw new ConfigError(["LIVE_VIEW_FRAME_ANCESTORS must be a CSP source list such as '*', 'self' or 'https://app.example.com https://*.example.com'"]);
  }
  const badId = instanceIdProblem('LIVE_VIEW_INSTANCE_ID', c.instanceId);
  if (badId) throw new ConfigError([badId]);
  if (c.recordingRenewMs * 2 > c.recordingLeaseMs) {
    throw new ConfigError([`RECORDING_RENEW_MS (${c.recordingRenewMs}) must be at most half of RECORDING_LEASE_MS (${c.recordingLeaseMs}): a lease must survive a missed renewal`]);
  }
  return {
    ...c,
    baseUrl: c.baseUrl ?? `http://localhost:${c.httpPort}`,
    recordingDir: path.resolve(c.recordingDir ?? path.join(c.dataDir, 'live-view', 'recordings')),
  };
}
