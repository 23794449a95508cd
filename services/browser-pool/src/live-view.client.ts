/** Live view page URLs, minted by the live-view service. */
import { createServiceClient, type InternalToken } from '../../common/src/grpc.js';
import { LiveViewMode, LiveViewServiceService } from '../../../gen/ats/liveview/v1/live_view.js';
import type { LiveViewMinter } from './browser-pool.js';

/** Mints interactive live view URLs through the live-view service. */
export function liveViewMinter(address: string, deadlineMs: number, token: InternalToken): LiveViewMinter & { close(): void } {
  const client = createServiceClient(LiveViewServiceService, address, deadlineMs, token);
  return {
    async mint(projectId, browserId, ttlSeconds) {
      return (await client.api.mintLiveViewUrl({ projectId, browserId, mode: LiveViewMode.LIVE_VIEW_MODE_INTERACTIVE, ttlSeconds })).url;
    },
    close: () => client.close(),
  };
}
