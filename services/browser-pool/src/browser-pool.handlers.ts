/**
 * BrowserPoolService handlers: proto ↔ domain. A call about one browser is answered where the
 * browser runs: here, or forwarded to the replica that owns it (owner-routing.ts).
 */
import type * as grpc from '@grpc/grpc-js';
import { InvalidArgumentError } from '../../common/src/errors.js';
import { agentEnum, agentName } from '../../common/src/agent-name.js';
import { callSignal, type Handlers } from '../../common/src/grpc.js';
import { BROWSER_STOP_REASON_CODES } from '../../common/src/resources.js';
import {
  BrowserStatus,
  KeyEventType,
  MouseButton,
  MouseEventType,
  StopReason,
  type Browser,
  type BrowserPoolServiceService,
  type DispatchInputRequest,
  type Profile,
  type StreamFramesResponse,
} from '../../../gen/ats/browserpool/v1/browser_pool.js';
import type { BrowserPool } from './browser-pool.js';
import type { BrowserRow, StopReason as StopReasonName } from './browser.repository.js';
import type { BrowserInput, MouseButtonName } from './input.js';
import type { ProfileRow } from './profile.repository.js';
import type { Profiles } from './profiles.js';
import { forwardedTo, timeLeftMs, type OwnerRouter } from './owner-routing.js';
import type { Frame } from './screencast.js';

const REASONS: Record<StopReasonName, StopReason> = BROWSER_STOP_REASON_CODES;

function reasonName(r: StopReason): StopReasonName {
  // A client asks for a stop: it never says crashed (or owner_lost) of its own.
  const found = (Object.entries(REASONS) as [StopReasonName, StopReason][]).find(([name, v]) => v === r && name !== 'crashed' && name !== 'owner_lost');
  return found ? found[0] : 'user';
}

/** A profile row as the proto message. */
export function profileOut(p: ProfileRow): Profile {
  return {
    id: p.id,
    projectId: p.projectId,
    name: p.name,
    userId: p.userId ?? undefined,
    lastUsedAt: p.lastUsedAt ?? undefined,
    cookieDomains: p.cookieDomains,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
  };
}

/** How long a read may wait for a profile save before it answers with what is stored: most of what is left of the caller's deadline. */
function readWaitMs(call: { getDeadline(): grpc.Deadline }): number {
  const left = timeLeftMs(call);
  return Number.isFinite(left) ? Math.max(0, left * 0.8 - 100) : Infinity;
}

function frameOut(f: Frame): StreamFramesResponse {
  return { jpeg: f.jpeg, timestampMs: f.timestampMs, width: f.width, height: f.height, url: f.url, title: f.title, tabs: f.tabs };
}

const MOUSE_TYPES: Partial<Record<MouseEventType, 'mousePressed' | 'mouseReleased' | 'mouseMoved'>> = {
  [MouseEventType.MOUSE_EVENT_TYPE_PRESSED]: 'mousePressed',
  [MouseEventType.MOUSE_EVENT_TYPE_RELEASED]: 'mouseReleased',
  [MouseEventType.MOUSE_EVENT_TYPE_MOVED]: 'mouseMoved',
};
const BUTTONS: Record<MouseButton, MouseButtonName> = {
  [MouseButton.MOUSE_BUTTON_UNSPECIFIED]: 'none',
  [MouseButton.MOUSE_BUTTON_LEFT]: 'left',
  [MouseButton.MOUSE_BUTTON_MIDDLE]: 'middle',
  [MouseButton.MOUSE_BUTTON_RIGHT]: 'right',
  [MouseButton.MOUSE_BUTTON_BACK]: 'back',
  [MouseButton.MOUSE_BUTTON_FORWARD]: 'forward',
  [MouseButton.UNRECOGNIZED]: 'none',
};
const KEY_TYPES: Partial<Record<KeyEventType, 'keyDown' | 'keyUp' | 'char'>> = {
  [KeyEventType.KEY_EVENT_TYPE_DOWN]: 'keyDown',
  [KeyEventType.KEY_EVENT_TYPE_UP]: 'keyUp',
  [KeyEventType.KEY_EVENT_TYPE_CHAR]: 'char',
};

function coordinate(v: number, name: string): number {
  if (!Number.isFinite(v) || Math.abs(v) > 100000) throw new InvalidArgumentError(`${name} must be a finite number`);
  return v;
}

/** The one input of a DispatchInput request, checked. */
export function inputOf(req: DispatchInputRequest): BrowserInput {
  if (req.mouse) {
    const type = MOUSE_TYPES[req.mouse.type];
    if (!type) throw new InvalidArgumentError('mouse.type is required');
    return {
      kind: 'mouse',
      type,
      x: coordinate(req.mouse.x, 'mouse.x'),
      y: coordinate(req.mouse.y, 'mouse.y'),
      button: BUTTONS[req.mouse.button] ?? 'none',
      clickCount: Math.max(0, Math.min(req.mouse.clickCount, 3)),
      modifiers: req.mouse.modifiers & 15,
    };
  }
  if (req.wheel) {
    return {
      kind: 'wheel',
      x: coordinate(req.wheel.x, 'wheel.x'),
      y: coordinate(req.wheel.y, 'wheel.y'),
      deltaX: coordinate(req.wheel.deltaX, 'wheel.delta_x'),
      deltaY: coordinate(req.wheel.deltaY, 'wheel.delta_y'),
    };
  }
  if (req.key) {
    const type = KEY_TYPES[req.key.type];
    if (!type) throw new InvalidArgumentError('key.type is required');
    if (req.key.key.length > 64 || req.key.code.length > 64 || req.key.text.length > 64) throw new InvalidArgumentError('key fields are at most 64 characters');
    return { kind: 'key', type, key: req.key.key, code: req.key.code, text: req.key.text, modifiers: req.key.modifiers & 15 };
  }
  const t = req.tab;
  if (t) {
    if (t.activateTabId !== undefined) return { kind: 'tab', action: 'activate', value: t.activateTabId };
    if (t.navigateUrl !== undefined) return { kind: 'tab', action: 'navigate', value: t.navigateUrl };
    if (t.back !== undefined) return { kind: 'tab', action: 'back', value: '' };
    if (t.forward !== undefined) return { kind: 'tab', action: 'forward', value: '' };
    if (t.reload !== undefined) return { kind: 'tab', action: 'reload', value: '' };
    if (t.newTabUrl !== undefined) return { kind: 'tab', action: 'newTab', value: t.newTabUrl };
    if (t.closeTabId !== undefined) return { kind: 'tab', action: 'close', value: t.closeTabId };
  }
  throw new InvalidArgumentError('Exactly one input (mouse, wheel, key or tab) is required');
}

/**
 * A browser as callers see it; without `access` the ways in are left out (no CDP token is signed),
 * as in a webhook event, which goes to a receiver outside.
 */
export function browserMessage(b: BrowserRow, access?: { cdpUrl: string; liveViewUrl: string }): Browser {
  return {
    id: b.id,
    projectId: b.projectId,
    status: b.status === 'active' ? BrowserStatus.BROWSER_STATUS_ACTIVE : BrowserStatus.BROWSER_STATUS_STOPPED,
    cdpUrl: access?.cdpUrl ?? '',
    liveViewUrl: access?.liveViewUrl ?? '',
    profileId: b.profileId ?? undefined,
    sessionId: b.sessionId ?? undefined,
    runId: b.runId ?? undefined,
    agent: agentEnum(b.agent),
    screenWidth: b.screenWidth,
    screenHeight: b.screenHeight,
    proxyCountryCode: b.proxyCountryCode ?? undefined,
    stealth: b.stealth,
    locale: b.locale ?? undefined,
    timezone: b.timezone ?? undefined,
    allowedDomains: b.allowedDomains ?? [],
    blockAds: b.blockAds,
    createdAt: b.createdAt,
    timeoutAt: b.timeoutAt,
    stoppedAt: b.stoppedAt ?? undefined,
    stopReason: b.stopReason ? REASONS[b.stopReason] : StopReason.STOP_REASON_UNSPECIFIED,
  };
}

/** The BrowserPoolService handlers over the pool, the profiles and the routing to other replicas. */
export function browserPoolHandlers(pool: BrowserPool, profiles: Profiles, router: OwnerRouter): Handlers<typeof BrowserPoolServiceService> {
  const browserOut = (b: BrowserRow, withAccess = true): Browser => browserMessage(b, withAccess ? { cdpUrl: pool.cdpUrlFor(b), liveViewUrl: b.liveViewUrl ?? '' } : undefined);
  return {
    async createBrowser(req, call) {
      // A draining replica hands new browsers to a peer (a forwarded create is never passed on again).
      if (pool.draining && forwardedTo(call.metadata) === undefined) {
        const peer = await router.peerForCreate(call);
        if (peer) return peer.client.api.createBrowser(req, peer.opts);
      }
      const row = await pool.create({
        projectId: req.projectId,
        profileId: req.profileId,
        proxyCountryCode: req.proxyCountryCode,
        screenWidth: req.screenWidth,
        screenHeight: req.screenHeight,
        timeoutMinutes: req.timeoutMinutes,
        stealth: req.stealth,
        locale: req.locale,
        timezone: req.timezone,
        allowedDomains: req.allowedDomains,
        blockAds: req.blockAds,
        sessionId: req.sessionId,
        runId: req.runId,
        agent: agentName(req.agent),
        signal: callSignal(call),
      });
      return { browser: browserOut(row) };
    },
    async getBrowser(req) {
      const row = await pool.get(req.projectId, req.browserId);
      // Active on a replica that is gone: reaped now, and read again (stopped, owner_lost).
      return { browser: browserOut((await router.ownerLost(row)) ? await pool.get(req.projectId, req.browserId) : row) };
    },
    async listBrowsers(req) {
      const status = req.status === BrowserStatus.BROWSER_STATUS_ACTIVE ? 'active' : req.status === BrowserStatus.BROWSER_STATUS_STOPPED ? 'stopped' : undefined;
      const list = () => pool.list(req.projectId, { ...(status ? { status } : {}), sessionId: req.sessionId, limit: req.limit, cursor: req.cursor });
      let page = await list();
      const owners = new Map(page.items.filter((b) => b.status === 'active').map((b) => [b.instanceId, b]));
      if ((await Promise.all([...owners.values()].map((b) => router.ownerLost(b)))).some(Boolean)) page = await list();
      return { items: page.items.map((b) => browserOut(b)), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async listRecordableBrowsers(req) {
      const page = await pool.listRecordable({ stoppedSince: req.stoppedSince, limit: req.limit, cursor: req.cursor });
      // The recorder needs neither way in: no CDP or live view URL leaves the pool here.
      return { items: page.items.map((b) => browserOut(b, false)), nextCursor: page.nextCursor };
    },
    async stopBrowser(req, call) {
      return router.call(req, call, (peer, o) => peer.api.stopBrowser(req, o), async () => ({
        browser: browserOut(await pool.stop(req.projectId, req.browserId, reasonName(req.reason))),
      }));
    },
    async releaseBrowser(req, call) {
      return router.call(req, call, (peer, o) => peer.api.releaseBrowser(req, o), async () => ({
        browser: browserOut(await pool.release(req.projectId, req.browserId, req.runId)),
      }));
    },
    async claimBrowser(req, call) {
      return router.call(req, call, (peer, o) => peer.api.claimBrowser(req, o), async () => ({
        browser: browserOut(await pool.claim(req.projectId, req.browserId, req.runId)),
      }));
    },
    async saveProfileState(req, call) {
      return router.call(req, call, (peer, o) => peer.api.saveProfileState(req, o), async () => {
        const p = await pool.saveProfileState(req.projectId, req.browserId);
        return { profile: p ? profileOut(p) : undefined };
      });
    },
    async getCdpEndpoint(req, call) {
      return router.call(req, call, (peer, o) => peer.api.getCdpEndpoint(req, o), async () => ({ websocketUrl: await pool.cdpEndpoint(req.projectId, req.browserId) }));
    },
    async streamFrames(req, call) {
      const ended = Promise.race([
        new Promise<void>((resolve) => {
          call.once('cancelled', () => resolve());
          call.once('error', () => resolve());
        }),
        pool.streamsEnded,
      ]);
      // A slow viewer skips images (never metadata) until its stream drains; others are not held up.
      let blocked = false;
      const write = (f: StreamFramesResponse) => {
        if (call.cancelled || (blocked && f.jpeg.length)) return;
        if (!call.write(f) && !blocked) {
          blocked = true;
          call.once('drain', () => (blocked = false));
        }
      };
      await router.stream(req, call, (peer, o) => peer.api.streamFrames(req, o), write, ended, () =>
        pool.streamFrames(req.projectId, req.browserId, (f) => write(frameOut(f)), ended, { passive: req.passive }),
      );
    },
    async dispatchInput(req, call) {
      const input = inputOf(req);
      return router.call(req, call, (peer, o) => peer.api.dispatchInput(req, o), async () => {
        await pool.input(req.projectId, req.browserId, input);
        return {};
      });
    },
    async listDownloads(req, call) {
      return router.call(req, call, (peer, o) => peer.api.listDownloads(req, o), async () => ({ items: await pool.downloads(req.projectId, req.browserId) }));
    },
    async createProfile(req) {
      return { profile: profileOut(await profiles.create(req.projectId, req.name, req.userId)) };
    },
    async getProfile(req, call) {
      await pool.profileSaved(req.projectId, req.profileId, readWaitMs(call));
      return { profile: profileOut(await profiles.get(req.projectId, req.profileId)) };
    },
    async listProfiles(req, call) {
      await pool.profileSaved(req.projectId, undefined, readWaitMs(call));
      const page = await profiles.list(req.projectId, req.limit, req.cursor);
      return { items: page.items.map(profileOut), nextCursor: page.nextCursor, hasMore: page.hasMore };
    },
    async updateProfile(req) {
      return { profile: profileOut(await profiles.rename(req.projectId, req.profileId, req.name)) };
    },
    async deleteProfile(req) {
      return { deleted: await profiles.delete(req.projectId, req.profileId) };
    },
    async checkBrowserOptions(req) {
      return pool.checkOptions(req.projectId, { profileId: req.profileId, proxyCountryCode: req.proxyCountryCode });
    },
  };
}
