import { Agent } from '../../../gen/ats/common/v1/common.js';
import { BrowserStatus, StopReason } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import { LiveViewMode, RecordingState } from '../../../gen/ats/liveview/v1/live_view.js';
import * as s from '../schemas.js';
import { page, presentBrowser, presentDownload, presentProfile, required } from '../presenters.js';
import { checkBrowserOptions } from '../browser-options.js';
import { HttpError } from '../http-errors.js';
import { route, type RouteContext, type RouteDef } from './route.js';

const opts = (ctx: RouteContext) => ({ requestId: ctx.requestId });
const brRef = (ctx: RouteContext<{ browserId: string }>) => ({ projectId: ctx.projectId, browserId: ctx.params.browserId });
const prRef = (ctx: RouteContext<{ profileId: string }>) => ({ projectId: ctx.projectId, profileId: ctx.params.profileId });

export function browserRoutes(): RouteDef[] {
  return [
    route({
      method: 'post',
      path: '/browsers',
      operationId: 'createBrowser',
      summary: 'Create a standalone browser (synchronous) with a CDP URL and a live view URL',
      tag: 'browsers',
      body: s.createBrowserBody,
      success: { status: 201, schema: s.browser },
      errors: [400, 404, 429],
      handler: async (ctx) => {
        const b = ctx.body;
        await checkBrowserOptions(ctx, { profileId: b.browser_profile_id, proxyCountryCode: b.proxy_country_code, timezone: b.timezone }, ['body', 'proxy_country_code'], 'refuse');
        const res = await ctx.clients.browserPool.api.createBrowser(
          {
            projectId: ctx.projectId,
            profileId: b.browser_profile_id,
            proxyCountryCode: b.proxy_country_code,
            screenWidth: b.screen_width,
            screenHeight: b.screen_height,
            timeoutMinutes: b.timeout_minutes,
            stealth: b.stealth,
            locale: b.locale,
            timezone: b.timezone,
            allowedDomains: b.allowed_domains ?? [],
            blockAds: b.block_ads,
            agent: Agent.AGENT_UNSPECIFIED,
          },
          // A burst queues for launches (up to 40 s in the pool): the SDKs wait 60 s. A create the deadline cuts is undone by the pool.
          { ...opts(ctx), deadlineMs: 55000 },
        );
        return presentBrowser(required(res.browser, 'browser'));
      },
    }),
    route({
      method: 'get',
      path: '/browsers',
      operationId: 'listBrowsers',
      summary: "List the project's browsers",
      tag: 'browsers',
      query: s.listBrowsersQuery,
      success: { status: 200, schema: s.browserList },
      handler: async (ctx) => {
        const q = ctx.query;
        const status = q.status === 'active' ? BrowserStatus.BROWSER_STATUS_ACTIVE : q.status === 'stopped' ? BrowserStatus.BROWSER_STATUS_STOPPED : BrowserStatus.BROWSER_STATUS_UNSPECIFIED;
        const res = await ctx.clients.browserPool.api.listBrowsers({ projectId: ctx.projectId, status, sessionId: q.session_id ?? '', limit: q.limit ?? 50, cursor: q.cursor ?? '' }, opts(ctx));
        return page(res, (b) => presentBrowser(b));
      },
    }),
    route({
      method: 'get',
      path: '/browsers/:browserId',
      operationId: 'getBrowser',
      summary: 'Read a browser record (with a fresh recordingUrl once the recording is ready)',
      tag: 'browsers',
      success: { status: 200, schema: s.browser },
      errors: [404],
      handler: async (ctx) => {
        const b = required((await ctx.clients.browserPool.api.getBrowser(brRef(ctx), opts(ctx))).browser, 'browser');
        if (b.recordingUrl) return presentBrowser(b, b.recordingUrl);
        // A fresh recording link on every read, once live view has finished the MP4.
        const rec = await ctx.clients.liveView.api.getRecording(brRef(ctx), opts(ctx)).catch(() => undefined);
        return presentBrowser(b, rec?.state === RecordingState.RECORDING_STATE_READY && rec.url ? rec.url : null);
      },
    }),
    route({
      method: 'post',
      path: '/browsers/:browserId/stop',
      operationId: 'stopBrowser',
      summary: 'Stop a browser (idempotent); flushes its profile and closes a browser-agent session',
      tag: 'browsers',
      success: { status: 200, schema: s.browser },
      errors: [404],
      handler: async (ctx) =>
        presentBrowser(required((await ctx.clients.browserPool.api.stopBrowser({ ...brRef(ctx), reason: StopReason.STOP_REASON_USER }, { ...opts(ctx), deadlineMs: 30000 })).browser, 'browser')),
    }),
    route({
      method: 'get',
      path: '/browsers/:browserId/recording',
      operationId: 'getRecording',
      summary: "A fresh presigned URL of the browser's MP4 recording (valid 1 hour)",
      tag: 'browsers',
      success: { status: 200, schema: s.recording },
      errors: [404, 409],
      handler: async (ctx) => {
        const r = await ctx.clients.liveView.api.getRecording(brRef(ctx), opts(ctx));
        // A ready recording always comes with its link's expiry (the service sets both together).
        if (r.state === RecordingState.RECORDING_STATE_READY && r.url && r.expiresAt) return { url: r.url, expiresAt: r.expiresAt };
        if (r.state === RecordingState.RECORDING_STATE_RECORDING || r.state === RecordingState.RECORDING_STATE_FINALIZING) {
          throw new HttpError(409, 'Recording is not finished yet', { 'Retry-After': '2' });
        }
        throw new HttpError(404, 'Recording not found');
      },
    }),
    route({
      method: 'post',
      path: '/browsers/:browserId/live-view-links',
      operationId: 'createLiveViewLink',
      summary: 'Mint a live view link of an active browser: view-only (watch) or interactive (watch and control)',
      tag: 'browsers',
      body: s.createLiveViewLinkBody,
      success: { status: 201, schema: s.liveViewLink },
      errors: [404],
      handler: async (ctx) => {
        const b = required((await ctx.clients.browserPool.api.getBrowser(brRef(ctx), opts(ctx))).browser, 'browser');
        // A stopped browser has nothing left to watch (its recording is the way to see it).
        if (b.status !== BrowserStatus.BROWSER_STATUS_ACTIVE) throw new HttpError(404, 'Browser not found');
        const res = await ctx.clients.liveView.api.mintLiveViewUrl(
          {
            ...brRef(ctx),
            mode: ctx.body.mode === 'view' ? LiveViewMode.LIVE_VIEW_MODE_VIEW : LiveViewMode.LIVE_VIEW_MODE_INTERACTIVE,
            ttlSeconds: ctx.body.expires_in_seconds ?? s.LIVE_VIEW_LINK_SECONDS.default,
          },
          opts(ctx),
        );
        return { url: res.url, expiresAt: res.expiresAt };
      },
    }),
    route({
      method: 'get',
      path: '/browsers/:browserId/downloads',
      operationId: 'listBrowserDownloads',
      summary: 'Files the browser downloaded from the web, with download links',
      tag: 'browsers',
      success: { status: 200, schema: s.downloadList },
      errors: [404],
      handler: async (ctx) => ({ items: (await ctx.clients.browserPool.api.listDownloads(brRef(ctx), { ...opts(ctx), deadlineMs: 30000 })).items.map(presentDownload) }),
    }),
    route({
      method: 'post',
      path: '/browser-profiles',
      operationId: 'createProfile',
      summary: 'Create a browser profile (keeps cookies, localStorage and logins)',
      tag: 'profiles',
      body: s.createProfileBody,
      success: { status: 201, schema: s.profile },
      handler: async (ctx) =>
        presentProfile(required((await ctx.clients.browserPool.api.createProfile({ projectId: ctx.projectId, name: ctx.body.name, userId: ctx.body.user_id }, opts(ctx))).profile, 'profile')),
    }),
    route({
      method: 'get',
      path: '/browser-profiles',
      operationId: 'listProfiles',
      summary: "List the project's browser profiles",
      tag: 'profiles',
      query: s.pageQuery,
      success: { status: 200, schema: s.profileList },
      handler: async (ctx) => {
        const q = ctx.query;
        return page(await ctx.clients.browserPool.api.listProfiles({ projectId: ctx.projectId, limit: q.limit ?? 50, cursor: q.cursor ?? '' }, opts(ctx)), presentProfile);
      },
    }),
    route({
      method: 'get',
      path: '/browser-profiles/:profileId',
      operationId: 'getProfile',
      summary: 'Read a browser profile',
      tag: 'profiles',
      success: { status: 200, schema: s.profile },
      errors: [404],
      handler: async (ctx) => presentProfile(required((await ctx.clients.browserPool.api.getProfile(prRef(ctx), opts(ctx))).profile, 'profile')),
    }),
    route({
      method: 'patch',
      path: '/browser-profiles/:profileId',
      operationId: 'updateProfile',
      summary: 'Rename a browser profile',
      tag: 'profiles',
      body: s.updateProfileBody,
      success: { status: 200, schema: s.profile },
      errors: [404],
      handler: async (ctx) =>
        presentProfile(required((await ctx.clients.browserPool.api.updateProfile({ ...prRef(ctx), name: ctx.body.name }, opts(ctx))).profile, 'profile')),
    }),
    route({
      method: 'delete',
      path: '/browser-profiles/:profileId',
      operationId: 'deleteProfile',
      summary: 'Delete a browser profile (idempotent)',
      tag: 'profiles',
      success: { status: 204 },
      handler: async (ctx) => {
        await ctx.clients.browserPool.api.deleteProfile(prRef(ctx), opts(ctx));
        return undefined;
      },
    }),
  ];
}
