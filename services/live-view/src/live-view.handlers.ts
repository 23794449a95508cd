/** LiveViewService handlers: proto ↔ domain. */
import { InvalidArgumentError } from '../../common/src/errors.js';
import type { Handlers } from '../../common/src/grpc.js';
import type { Signer } from '../../common/src/signing.js';
import { LiveViewMode, RecordingState, type LiveViewServiceService } from '../../../gen/ats/liveview/v1/live_view.js';
import { liveViewUrl, mintLiveViewToken } from './live-view-token.js';
import type { RecordingStateName, RecordingStatus } from './recording.repository.js';
import { recordingFileName, type RecordingStore } from './recording-store.js';

/** What GetRecording needs from the recorder. */
export interface RecordingLookup {
  /** The browser's recording in this project, if it has one (`adopt`: start recording an active browser nobody told us of). */
  status(projectId: string, browserId: string, adopt: boolean): Promise<RecordingStatus | undefined>;
}

export interface LiveViewHandlerDeps {
  signer: Signer;
  baseUrl: string;
  tokenTtlSeconds: number;
  recordings: RecordingLookup;
  store: RecordingStore;
  recordingUrlTtlSeconds: number;
  /** False when recording is switched off: every browser has none. */
  recordingEnabled: boolean;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

function requireIds(req: { projectId: string; browserId: string }): void {
  if (!ID.test(req.projectId)) throw new InvalidArgumentError('project_id is required');
  if (!ID.test(req.browserId)) throw new InvalidArgumentError('browser_id must be 1 to 64 letters, digits, - or _');
}

const STATES: Record<RecordingStateName, RecordingState> = {
  recording: RecordingState.RECORDING_STATE_RECORDING,
  finalizing: RecordingState.RECORDING_STATE_FINALIZING,
  ready: RecordingState.RECORDING_STATE_READY,
  empty: RecordingState.RECORDING_STATE_NONE,
  failed: RecordingState.RECORDING_STATE_NONE,
};

export function liveViewHandlers(deps: LiveViewHandlerDeps): Handlers<typeof LiveViewServiceService> {
  return {
    async mintLiveViewUrl(req) {
      requireIds(req);
      if (req.ttlSeconds < 0) throw new InvalidArgumentError('ttl_seconds must not be negative');
      const mode = req.mode === LiveViewMode.LIVE_VIEW_MODE_VIEW ? 'view' : 'interactive';
      const { token, expiresAtSec } = mintLiveViewToken(deps.signer, req.projectId, req.browserId, mode, req.ttlSeconds || deps.tokenTtlSeconds);
      return { url: liveViewUrl(deps.baseUrl, req.browserId, token), expiresAt: new Date(expiresAtSec * 1000).toISOString() };
    },

    async getRecording(req) {
      requireIds(req);
      const row = await deps.recordings.status(req.projectId, req.browserId, deps.recordingEnabled);
      const state = row ? STATES[row.state] : RecordingState.RECORDING_STATE_NONE;
      if (state !== RecordingState.RECORDING_STATE_READY) return { state };
      const link = await deps.store.link(req.projectId, row!.objectKey!, deps.recordingUrlTtlSeconds, recordingFileName(req.browserId));
      return { state, url: link.url, expiresAt: link.expiresAt };
    },
  };
}
