/**
 * The browser pool: hands out browsers (warm when it can, launched when it must), keeps their
 * records, loads and saves profiles, stops them (on request, at their timeout, when idle, when a
 * run is done, on shutdown — always the same way), and on start takes over the browsers a previous
 * process of the same instance left running (their supervisors outlive it) and reaps the rest. One Chromium process per browser: a cdpUrl controls a whole browser.
 */
import fs from 'node:fs';
import path from 'node:path';
import { CancelledError, FailedPreconditionError, InvalidArgumentError, NotFoundError, ResourceExhaustedError, UnavailableError } from '../../common/src/errors.js';
import { newId } from '../../common/src/ids.js';
import type { Logger } from '../../common/src/logger.js';
import type { Signer } from '../../common/src/signing.js';
import type { BrowserEvents } from './browser-events.js';
import type { AgentName } from '../../common/src/agent-name.js';
import type { BrowserRepository, BrowserRow, BrowserStatus, NewBrowser, StopReason } from './browser.repository.js';
import { cdpUrl } from './cdp-token.js';
import { killStrays, strayTempDirs } from './chromium.js';
import { readStates, removeState, removeStaleSockets, stopSupervisor, supervisorAlive, type SupervisorState } from './supervisor.js';
import type { CdpProxyBackend } from './cdp-proxy.js';
import type { BrowserConfinement } from './confinement.js';
import type { CpuGroup } from './cpu-group.js';
import { AdBlocker, DEFAULT_ADBLOCK_LISTS } from './adblock.js';
import { allowedDomainPatterns, EgressProxy, type LookupAll } from './egress-proxy.js';
import type { Downloads, ListedDownload } from './downloads.js';
import { localeAndTimezone, pickHardware, type Hardware } from './identity.js';
import { dispatchInput, type BrowserInput } from './input.js';
import { LiveBrowser, sessionIdOf, type LiveBrowserOptions } from './live-browser.js';
import { applyProfileState, captureProfileState } from './profile-state.js';
import type { ProfileRow } from './profile.repository.js';
import type { Profiles } from './profiles.js';
import type { Proxies } from './proxies.js';
import type { Frame, ScreencastOptions } from './screencast.js';
import { NodeSlots, type Slot } from './node-slots.js';
import { WarmPool, type LaunchTiming } from './warm-pool.js';

/** How long a read waits for a live view URL to be minted again before it answers without one. */
const READ_REMINT_WAIT_MS = 1000;
/** Most a create waits for a Chromium its project's stop is preparing for reuse (a launch takes longer) when no warm one is ready. */
const REUSE_WAIT_MS = 10_000;
/**
 * The same when a warm one is ready: taking it costs a launch to replace it. Preparing a kept
 * Chromium (its session's downloads stored, a new context opened) takes well under a second.
 */
const REUSE_WAIT_WARM_MS = 2_000;
/** How often a recording's frame stream hears that its browser still lives. */
const ALIVE_EVERY_MS = 1000;

/** Mints the signed live view page URL of a browser (the live-view service in production). */
export interface LiveViewMinter {
  mint(projectId: string, browserId: string, ttlSeconds: number): Promise<string>;
}

/** Everything the pool is built from (each part injectable in tests). */
export interface BrowserPoolOptions {
  browsers: BrowserRepository;
  profiles: Profiles;
  downloads: Downloads;
  liveView: LiveViewMinter;
  /** First pause before a live view URL that could not be minted at create is tried again (doubling after). */
  remintFirstMs?: number;
  events: BrowserEvents;
  proxies: Proxies;
  /** Signs CDP tokens. */
  signer: Signer;
  /** Public ws(s):// base of the CDP proxy. */
  cdpWsBase: string;
  /**
   * ws:// base of the CDP proxy as other services reach it (Kubernetes: ws://browser-pool:9222);
   * the run service drives browsers through the proxy too (Chromium has no port of its own).
   * Set later with `useCdpInternalBase` when the proxy's port is known only once it listens.
   */
  cdpInternalBase?: string | undefined;
  /**
   * Asks the replica that runs a browser recorded stopped here (a reclaimed one) to end it; unset
   * with one replica. Its answer is not awaited: the owner also ends it at its next heartbeat.
   */
  endElsewhere?: (row: BrowserRow) => void;
  /** Names this pool process's browsers in the database (stable across its restarts). */
  instanceId: string;
  /** Parent of every browser's directory. */
  rootDir: string;
  /** `nice`: how much lower Chromium's CPU priority is than the services' (0 = the same). */
  chromium: { executable: string; confinement: BrowserConfinement; extraArgs: string[]; nice?: number | undefined; cpuGroup?: CpuGroup | undefined };
  /** How long a browser's supervisor keeps it with no pool process connected (POOL_RESTART_GRACE_MS). */
  restartGraceMs?: number | undefined;
  /**
   * What browsers' networks may reach. The services' internal ports are refused on this host
   * (the pool adds its browsers' egress proxies to `deniedLocalPorts`).
   */
  egress: { allowPrivateNetworks: boolean; deniedLocalPorts: number[]; deniedEndpoints?: { host: string; port: number }[] };
  /** The filter lists of `block_ads` (default: EasyList and EasyPrivacy from Debian's uBlock Origin package). */
  adblockLists?: string[] | undefined;
  /** Name resolution of the browsers' egress proxies (default: the system's); tests map ad hosts to a local site with it. */
  egressLookup?: LookupAll | undefined;
  screencast: ScreencastOptions;
  /** Warm browsers kept even without demand (the warm pool's floor). */
  warmSize: number;
  /** Most warm browsers kept under demand (default: the floor, i.e. a fixed size). */
  warmMax?: number;
  /** Time constant of the demand average that sizes the warm pool (default 30 s). */
  warmWindowMs?: number;
  /** Warm launches at once (default 2). */
  warmParallelLaunches?: number;
  /**
   * How long a stopped browser's Chromium waits, its session's context disposed, for the same
   * project's next browser that a warm one would serve (default 0: never reused).
   */
  reuseIdleMs?: number;
  /** Chromium starts at once, requested and warm (default 4): a start waits its turn, and its timeout counts from then. */
  parallelLaunches?: number;
  /** Most a requested launch waits for a node slot and its turn to start (default 40 s, so a burst of fifty on two cores is served; the gateway waits 55 s for a create); then the create fails, 503. */
  launchQueueMs?: number;
  /** Chromium processes this process runs at once, warm, active and still stopping (default: no limit). */
  maxBrowsers?: number;
  maxActivePerProject: number;
  defaultTimeoutMinutes: number;
  /** 0 = browsers are never stopped for idleness. */
  idleTimeoutSeconds: number;
  reaperIntervalMs: number;
  defaultWidth: number;
  defaultHeight: number;
  logger: Logger;
  now?: () => number;
  /** Bound on loading or saving a profile's state. */
  profileTimeoutMs?: number;
  /** Bound on storing a stopping browser's downloads. */
  downloadSyncTimeoutMs?: number;
  /** How long a read waits for live-view to mint a missing live view URL (default 1 s); it is stored when it comes. */
  readMintWaitMs?: number;
}

/** A request for a browser; unset fields take the configured defaults. */
export interface CreateBrowserInput {
  projectId: string;
  profileId?: string | undefined;
  proxyCountryCode?: string | undefined;
  screenWidth?: number | undefined;
  screenHeight?: number | undefined;
  timeoutMinutes?: number | undefined;
  sessionId?: string | undefined;
  runId?: string | undefined;
  agent?: AgentName | null | undefined;
  /** Default true: the browser presents a person's browser's fingerprint (identity.ts). */
  stealth?: boolean | undefined;
  /** BCP 47 tag; default: the proxy country's, else en-US. */
  locale?: string | undefined;
  /** IANA name; default: the proxy country's, else UTC. */
  timezone?: string | undefined;
  /** Hosts its network may reach (`example.com`, `*.example.com`); empty: any. */
  allowedDomains?: string[] | undefined;
  /** Default false: ads and trackers blocked at its egress proxy and hidden in its pages (adblock.ts). */
  blockAds?: boolean | undefined;
  /**
   * The caller gave up (its deadline passed, or it went away): a create still waiting for its turn
   * or launching is abandoned, and one that got its browser ends it and leaves no record, so a
   * timed-out create never leaves a browser running against the project's cap.
   */
  signal?: AbortSignal | undefined;
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    }),
  ]);
}

/** The pool of browsers of this process: the domain behind every RPC and the CDP proxy. */
export class BrowserPool implements CdpProxyBackend {
  readonly #o: BrowserPoolOptions;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #active = new Map<string, LiveBrowser>();
  /** Live view URLs being minted again for reads (browser id → the row with its URL). */
  readonly #reminting = new Map<string, Promise<BrowserRow>>();
  /** Browsers stopping (id → done: profile saved, downloads stored, process gone). */
  readonly #ending = new Map<string, Promise<unknown>>();
  /** Their stopped records (what a stop answers at once). */
  readonly #stops = new Map<string, Promise<BrowserRow | undefined>>();
  /** Directory removals still running in the background (awaited on shutdown). */
  readonly #removals = new Set<Promise<void>>();
  readonly #warm: WarmPool;
  /** Chromiums of stopped browsers kept for their project's next browser (newest last), each until its timer. */
  readonly #reusable: { projectId: string; b: LiveBrowser; timer: NodeJS.Timeout }[] = [];
  /** Per project, stops whose Chromium is being prepared for reuse, and the creates waiting for one. */
  readonly #reusing = new Map<string, { pending: number; waiters: Set<() => void> }>();
  readonly #slots: NodeSlots;
  /** Chromium starts under way (requests before warm ones). */
  readonly #starting: NodeSlots;
  /** Ports no browser may reach on this host: the configured ones (a set built once) and every browser's egress proxy. */
  readonly #deniedLocalPorts: Pick<ReadonlySet<number>, 'has'>;
  /** Profile saves of stops that answered before them (project/profile → done): a create naming the profile waits. */
  readonly #profileSaves = new Map<string, Promise<unknown>>();
  #cdpInternalBase: string | undefined;
  /** The hardware the last browser without a profile presented (the next one differs). */
  #lastHardware: Hardware | undefined;
  #reaper: NodeJS.Timeout | undefined;
  #stopped = false;
  #draining = false;
  /** Shutting down with the browsers left for the next process (`detachAll`). */
  #leaving = false;
  /** Told when the last active browser ends (a drain waits for it). */
  readonly #whenEmpty = new Set<() => void>();
  #stopping: Promise<void> | undefined;
  #endStreams!: () => void;
  readonly #streamsEnded = new Promise<void>((r) => (this.#endStreams = r));

  constructor(o: BrowserPoolOptions) {
    this.#o = o;
    this.#logger = o.logger;
    this.#now = o.now ?? Date.now;
    this.#cdpInternalBase = o.cdpInternalBase;
    const configured = new Set(o.egress.deniedLocalPorts);
    this.#deniedLocalPorts = { has: (port) => configured.has(port) || EgressProxy.livePorts.has(port) };
    this.#slots = new NodeSlots(o.maxBrowsers ?? Infinity);
    this.#starting = new NodeSlots(o.parallelLaunches ?? 4);
    this.#warm = new WarmPool({
      settings: { floor: o.warmSize, ceiling: Math.max(o.warmMax ?? o.warmSize, o.warmSize), windowMs: o.warmWindowMs ?? 30_000, maxParallelLaunches: o.warmParallelLaunches ?? 2 },
      logger: o.logger,
      now: this.#now,
      launch: (signal, timing) => this.#launch(newId('brw'), o.defaultWidth, o.defaultHeight, null, true, signal, 'warm', timing),
    });
    this.#slots.onStarved = () => this.#yieldReusable() || this.#warm.yieldOne();
  }

  #launchOptions(id: string, width: number, height: number, upstream: URL | undefined, stealth: boolean, signal?: AbortSignal): LiveBrowserOptions {
    return {
      stealth,
      executable: this.#o.chromium.executable,
      confinement: this.#o.chromium.confinement,
      extraArgs: this.#o.chromium.extraArgs,
      rootDir: this.#o.rootDir,
      id,
      width,
      height,
      egress: { allowPrivateNetworks: this.#o.egress.allowPrivateNetworks, deniedLocalPorts: this.#deniedLocalPorts, deniedEndpoints: this.#o.egress.deniedEndpoints },
      egressLookup: this.#o.egressLookup,
      upstream,
      signal,
      screencast: this.#o.screencast,
      // Only a Chromium that may be reused runs its sessions in contexts of their own.
      sessionContext: (this.#o.reuseIdleMs ?? 0) > 0,
      restartGraceMs: this.#o.restartGraceMs,
      nice: this.#o.chromium.nice,
      cpuGroup: this.#o.chromium.cpuGroup,
      logger: this.#logger,
      now: this.#now,
    };
  }

  /**
   * Launches a browser once the node has a slot for it and a start is free; the slot is held until
   * its process has exited and its folders are gone. Ten starts at once on a loaded two-core machine
   * all ran past their 20 s timeout; in turns each gets the CPU to finish.
   */
  async #launch(
    id: string,
    width: number,
    height: number,
    proxyCountryCode: string | null,
    stealth: boolean,
    signal?: AbortSignal,
    kind: 'request' | 'warm' = 'request',
    timing: LaunchTiming = {},
  ): Promise<LiveBrowser> {
    if (proxyCountryCode) this.#o.proxies.check(proxyCountryCode);
    const upstream = proxyCountryCode ? this.#o.proxies.upstreamFor(proxyCountryCode) : undefined;
    // A request waits its turn a bounded time (its caller gives up soon after); a warm launch has no caller.
    const waitSignal = kind === 'request' ? AbortSignal.any([...(signal ? [signal] : []), AbortSignal.timeout(this.#o.launchQueueMs ?? 40_000)]) : signal;
    this.#countLaunch(+1);
    let slot: Slot | undefined;
    try {
      slot = await this.#slots.acquire(kind, waitSignal);
      const start = await this.#starting.acquire(kind, waitSignal);
      const began = this.#now();
      let b: LiveBrowser;
      try {
        b = await LiveBrowser.launch(this.#launchOptions(id, width, height, upstream, stealth, signal), proxyCountryCode);
        timing.startMs = this.#now() - began;
      } finally {
        start.release();
      }
      const held = slot;
      void Promise.all([b.chromium.exited, b.ending])
        .then(() => b.chromium.removed)
        .finally(() => held.release());
      return b;
    } catch (err) {
      slot?.release();
      throw err;
    } finally {
      this.#countLaunch(-1);
    }
  }

  /** Counts a launch in (+1) or out (-1): while several are under way (waiting or starting), the browsers' cgroup is held down. */
  #countLaunch(delta: 1 | -1): void {
    this.#launching += delta;
    this.#o.chromium.cpuGroup?.bursting(this.#launching > 1);
  }

  /** Browsers being launched now, waiting for their turn or starting. */
  #launching = 0;

  /** Takes over or reaps what a previous process of this instance left, then starts the warm pool and the reaper. */
  async start(): Promise<void> {
    await this.#recover();
    this.#warm.start();
    this.#reaper = setInterval(() => void this.reap().catch((err) => this.#logger.error({ err }, 'reaper failed')), this.#o.reaperIntervalMs);
    this.#reaper.unref();
  }

  /**
   * What a previous process left (killed, or restarted with POOL_KEEP_BROWSERS_ON_EXIT): each
   * browser whose supervisor still runs and whose record is active and this instance's is taken
   * over (reattach). The rest is reaped: supervisors whose record says stopped (or that cannot be
   * reattached, or warm ones, which had no record) are ended, Chromium groups without a supervisor
   * killed, their directories removed, active records without a browser recorded stopped.
   */
  async #recover(): Promise<void> {
    const root = this.#o.rootDir;
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    const leftovers = await this.#o.browsers.activeOf(this.#o.instanceId);
    const records = new Map(leftovers.map((r) => [r.id, r]));
    /** A session's folder: its own id's, or that of the browser it reused. */
    const folderOf = new Map<string, string>();
    let finished = 0;
    for (const state of readStates(root)) {
      const sessionId = sessionIdOf(state);
      folderOf.set(sessionId, state.id);
      const row = records.get(sessionId);
      if (row && state.browser && supervisorAlive(state)) {
        try {
          await this.#adopt(state, row);
          continue;
        } catch (err) {
          this.#logger.warn({ err, browserId: state.id }, 'browser of a previous process not taken over; stopping it');
        }
      }
      const stopped = row ? undefined : await this.#o.browsers.byId(sessionId);
      if (stopped?.status === 'stopped' && stopped.instanceId === this.#o.instanceId) {
        await this.#finishStop(state, stopped);
        finished++;
        continue;
      }
      stopSupervisor(state);
      removeState(root, state.id);
    }
    // Saves the previous process had marked and did not finish (those of its unfinished stops are done now).
    await this.#o.profiles.clearSavingOf(this.#o.instanceId);
    const kept = [...this.#active.values()];
    const killed = await killStrays(root, this.#logger, new Set(kept.map((b) => b.chromium.pgid)));
    const stopped = leftovers.filter((row) => !this.#active.has(row.id));
    for (const row of stopped) {
      // Keep what it downloaded before its folder goes; the storage service may be down, so bounded.
      await within(this.#o.downloads.sync(row.projectId, row.id, path.join(root, folderOf.get(row.id) ?? row.id, 'downloads')), 5000, 'storing downloads').catch((err) =>
        this.#logger.warn({ err, browserId: row.id }, 'downloads of a crashed browser not stored'),
      );
      const marked = await this.#o.browsers.markStopped(row.id, 'shutdown', new Date(this.#now()));
      if (marked) this.#o.events.publish('stopped', marked);
    }
    const keep = new Set(kept.flatMap((b) => [b.chromium.dir, b.chromium.tmpDir]));
    const dirs = [...fs.readdirSync(root).map((d) => path.join(root, d)), ...strayTempDirs(root)].filter((d) => !keep.has(d));
    for (const d of dirs) await fs.promises.rm(d, { recursive: true, force: true, maxRetries: 3 });
    removeStaleSockets(root, new Set(kept.map((b) => b.chromium.id)));
    if (killed.length || stopped.length || dirs.length || kept.length || finished) {
      this.#logger.info({ processGroups: killed.length, records: stopped.length, dirs: dirs.length, takenOver: kept.length, stopsFinished: finished }, 'browsers of a previous process taken over or reaped');
    }
  }

  /**
   * A stop the previous process answered and did not finish (it died during the stop's background
   * work, or was taken for dead meanwhile): the downloads in the browser's folder are stored, its
   * profile is captured from the Chromium its supervisor kept (when it did), the browser ends, and
   * its stop is announced (the previous process would have once the process was gone).
   */
  async #finishStop(state: SupervisorState, row: BrowserRow): Promise<void> {
    await within(this.#o.downloads.sync(row.projectId, row.id, path.join(this.#o.rootDir, state.id, 'downloads')), this.#o.downloadSyncTimeoutMs ?? 20000, 'storing downloads').catch((err) =>
      this.#logger.warn({ err, browserId: row.id }, 'downloads of an unfinished stop not stored'),
    );
    let ended = false;
    if (row.profileId && state.browser && supervisorAlive(state)) {
      try {
        const b = await this.#reattach(state, row);
        try {
          await this.#saveProfile(b);
        } catch (err) {
          this.#logger.warn({ err, browserId: row.id }, 'profile of an unfinished stop not saved');
        } finally {
          await b.shutdown();
          ended = true;
        }
      } catch (err) {
        this.#logger.warn({ err, browserId: row.id }, 'browser of an unfinished stop not reached; its profile keeps what was saved before');
      }
    }
    if (!ended) {
      stopSupervisor(state);
      removeState(this.#o.rootDir, state.id);
    }
    // A reaped browser's stop was announced by its reaper.
    if (row.stopReason !== 'owner_lost') this.#o.events.publish('stopped', row);
    this.#logger.info({ browserId: row.id, reason: row.stopReason }, 'stop left unfinished by the previous process finished');
  }

  /** Connects to a previous process's browser through its supervisor, with the options its record says it was launched with. */
  #reattach(state: SupervisorState, row: BrowserRow): Promise<LiveBrowser> {
    const upstream = row.proxyCountryCode ? this.#o.proxies.upstreamFor(row.proxyCountryCode) : undefined;
    return LiveBrowser.adopt(this.#launchOptions(row.id, row.screenWidth, row.screenHeight, upstream, row.stealth), state, row);
  }

  /** Takes over one handed-out browser of a previous process: its egress policy, identity and ad blocking as its record says. */
  async #adopt(state: SupervisorState, row: BrowserRow): Promise<void> {
    const blocker = row.blockAds ? await this.adBlocker() : undefined;
    const b = await this.#reattach(state, row);
    try {
      if (!b.identity) throw new Error('its identity was never set (a create that did not finish)');
      b.egress.setAllowedDomains(row.allowedDomains ?? undefined);
      b.egress.setBlocker(blocker);
      await within(b.present(b.identity, blocker), this.#profileTimeout, 'setting up its fingerprint again');
    } catch (err) {
      await b.detach();
      throw err;
    }
    b.touch();
    this.#track(b);
    if (!row.liveViewUrl) this.#remintUntilMinted(row);
    this.#logger.info({ browserId: row.id, projectId: row.projectId }, 'browser taken over from a previous process');
  }

  /** Holds a handed-out browser as active here; one that exits on its own is recorded stopped (crashed). */
  #track(b: LiveBrowser): void {
    const id = b.id;
    this.#active.set(id, b);
    void b.chromium.exited.then(() => {
      // Its session ended (and its Chromium serves another now), or it is ending.
      if (this.#active.get(id) !== b || this.#ending.has(id) || this.#leaving) return;
      this.#logger.warn({ browserId: id }, 'chromium exited on its own');
      this.#end(b, 'crashed').catch((err) => this.#logger.error({ err, browserId: id }, 'crashed browser not recorded as stopped'));
    });
  }

  /** Resolves once the warm pool is full (for tests and benchmarks). */
  whenWarm(): Promise<void> {
    return this.#warm.whenFull();
  }

  get warmCount(): number {
    return this.#warm.idleCount;
  }

  // ---- create ----

  /**
   * The ad and tracker filter engine (parsed once per process, off the event loop); UNAVAILABLE
   * when its lists cannot be read. main.ts starts loading it at start-up.
   */
  async adBlocker(): Promise<AdBlocker> {
    const lists = this.#o.adblockLists ?? DEFAULT_ADBLOCK_LISTS;
    try {
      return await AdBlocker.load(lists);
    } catch (err) {
      this.#logger.error({ err, lists }, 'ad and tracker filter lists not loaded');
      throw new UnavailableError('Ad blocking is not available on this server (its filter lists cannot be read)');
    }
  }

  #validate(input: CreateBrowserInput): { width: number; height: number; timeoutMinutes: number; proxy: string | null; stealth: boolean; locale: string; timezone: string; allowedDomains: string[] | null; blockAds: boolean } {
    const { screenWidth: w, screenHeight: h } = input;
    if ((w === undefined) !== (h === undefined)) throw new InvalidArgumentError('screen_width and screen_height must be given together');
    if (w !== undefined && (!Number.isInteger(w) || w < 320 || w > 3840)) throw new InvalidArgumentError('screen_width must be an integer from 320 to 3840');
    if (h !== undefined && (!Number.isInteger(h) || h < 240 || h > 2160)) throw new InvalidArgumentError('screen_height must be an integer from 240 to 2160');
    const t = input.timeoutMinutes ?? this.#o.defaultTimeoutMinutes;
    if (!Number.isInteger(t) || t < 1 || t > 240) throw new InvalidArgumentError('timeout_minutes must be an integer from 1 to 240');
    const cc = input.proxyCountryCode || null;
    if (cc !== null) {
      if (!/^[a-z]{2}$/.test(cc)) throw new InvalidArgumentError('proxy_country_code must be an ISO 3166-1 alpha-2 code in lower case');
      this.#o.proxies.check(cc);
    }
    return { width: w ?? this.#o.defaultWidth, height: h ?? this.#o.defaultHeight, timeoutMinutes: t, proxy: cc, stealth: input.stealth ?? true,
      ...localeAndTimezone({ ...input, proxyCountryCode: cc }),
      allowedDomains: input.allowedDomains?.length ? allowedDomainPatterns(input.allowedDomains) : null,
      blockAds: input.blockAds ?? false,
    };
  }

  /**
   * What `create` would refuse about a profile and a proxy country, found without starting
   * anything: an unknown profile throws NOT_FOUND; a country without a proxy is returned as the problem.
   */
  async checkOptions(projectId: string, o: { profileId?: string | undefined; proxyCountryCode?: string | undefined }): Promise<{ proxyCountryCodeProblem?: string }> {
    if (o.profileId) await this.#o.profiles.get(projectId, o.profileId);
    const problem = o.proxyCountryCode ? this.#o.proxies.problem(o.proxyCountryCode) : undefined;
    return problem ? { proxyCountryCodeProblem: problem } : {};
  }

  /**
   * Provisions a browser synchronously: a Chromium kept for the project or a warm one if one fits,
   * else launched; profile loaded before it is returned. A Chromium that cannot be prepared (its
   * fingerprint or profile not set within the time) is ended and the create made once more on
   * another (`retry`: that second attempt, which takes no kept Chromium and is no new demand).
   */
  async create(input: CreateBrowserInput, retry = false): Promise<BrowserRow> {
    if (this.#stopped || this.#draining) throw new UnavailableError('The browser pool is shutting down');
    const v = this.#validate(input);
    const blocker = v.blockAds ? await this.adBlocker() : undefined;
    // A stop that answered before its profile capture finished: this browser starts from what it saved.
    if (input.profileId) await this.profileSaved(input.projectId, input.profileId);
    const state = input.profileId ? await this.#o.profiles.state(input.projectId, input.profileId) : undefined;
    // Warm browsers are stealth ones (the default); a browser without stealth is launched as headless Chromium is.
    const fitsWarm = v.proxy === null && v.stealth && v.width === this.#o.defaultWidth && v.height === this.#o.defaultHeight;
    let reused = fitsWarm && !retry ? this.#takeReusable(input.projectId) : undefined;
    // A stop of the project about to hand over its Chromium is waited for even with a warm one idle: taking the warm one would launch its replacement.
    if (fitsWarm && !retry && !reused) reused = await this.#awaitReusable(input.projectId, input.signal, this.#warm.idleCount === 0 ? REUSE_WAIT_MS : REUSE_WAIT_WARM_MS);
    // The warm pool sizes itself by the creates it must serve: those a kept Chromium serves need no launch.
    if (fitsWarm && !reused && !retry) this.#warm.noteDemand();
    let browser = reused ?? (fitsWarm ? this.#warm.take() : undefined);
    const warm = browser !== undefined && !reused;
    const id = browser?.id ?? newId('brw');
    const now = this.#now();
    const timeoutAt = new Date(now + v.timeoutMinutes * 60_000).toISOString();
    let row: BrowserRow | undefined;
    try {
      row = await this.#insertWithRoom(
        {
          id,
          projectId: input.projectId,
          profileId: input.profileId || null,
          sessionId: input.sessionId || null,
          runId: input.runId || null,
          agent: input.agent ?? null,
          screenWidth: v.width,
          screenHeight: v.height,
          proxyCountryCode: v.proxy,
          stealth: v.stealth,
          locale: v.locale,
          timezone: v.timezone,
          allowedDomains: v.allowedDomains,
          blockAds: v.blockAds,
          liveViewUrl: await this.#mintLiveView(input.projectId, id, timeoutAt),
          instanceId: this.#o.instanceId,
          pid: browser?.chromium.pid ?? null,
          timeoutAt,
        },
        new Date(now),
      );
    } finally {
      if (browser && !row) {
        if (reused) this.#keepReusable(input.projectId, reused);
        else this.#warm.giveBack(browser);
      }
    }
    // Launching a replacement forks a big process; let this answer leave first.
    if (warm) setTimeout(() => this.#warm.refill(), 10).unref();
    if (!row) {
      const soonest = await this.#o.browsers.soonestTimeout(input.projectId);
      const untilSoonest = soonest ? Math.ceil((Date.parse(soonest) - now) / 1000) : 30;
      throw new ResourceExhaustedError(`This project already has ${this.#o.maxActivePerProject} active browsers in use; stop one first`, {
        retryAfterSeconds: Math.min(Math.max(untilSoonest, 1), 30),
      });
    }
    if (!browser) {
      try {
        browser = await this.#launch(id, v.width, v.height, v.proxy, v.stealth, input.signal);
      } catch (err) {
        await this.#o.browsers.delete(id);
        if (input.signal?.aborted) {
          this.#logger.info({ browserId: id }, 'create abandoned by its caller before its browser started');
          throw new CancelledError('The create was cancelled by its caller');
        }
        this.#logger.error({ err, browserId: id }, 'chromium launch failed');
        throw new UnavailableError('Could not start a browser; try again', { cause: err });
      }
      if (this.#stopped) {
        // Shutdown began while it launched: it would outlive the pool's stop of every browser.
        await browser.shutdown();
        this.#trackRemoval(browser);
        await this.#o.browsers.markStopped(id, 'shutdown', new Date(this.#now()));
        throw new UnavailableError('The browser pool is shutting down');
      }
      row = (await this.#o.browsers.setPid(id, browser.chromium.pid)) ?? row;
    }
    const b = browser;
    b.egress.setAllowedDomains(v.allowedDomains ?? undefined);
    b.egress.setBlocker(blocker);
    b.row = row;
    b.touch();
    this.#track(b);
    const hardware = v.stealth ? pickHardware(row.profileId, this.#lastHardware) : null;
    if (hardware && !row.profileId) this.#lastHardware = hardware;
    const profileId = input.profileId;
    try {
      await b.serialize(async () => {
        await within(b.present({ hardware, locale: v.locale, timezone: v.timezone }, blocker), this.#profileTimeout, 'setting up its fingerprint');
        if (state && profileId) {
          await within(applyProfileState(b.chromium.conn, b.contextId, state, this.#profileTimeout), this.#profileTimeout, 'loading the profile');
          await this.#o.profiles.markUsed(input.projectId, profileId);
        }
      });
    } catch (err) {
      if (!retry && !input.signal?.aborted && !this.#stopped && !this.#draining) {
        // One Chromium that misbehaves (a kept one, a warm one, a launch on a loaded node) is not the caller's failure: a new launch is.
        this.#logger.warn({ err, browserId: id, warm, reused: reused !== undefined }, 'browser could not be prepared; ended, the create tries another');
        await this.#discard(b);
        return this.create(input, true);
      }
      this.#logger.error({ err, browserId: id }, 'browser could not be prepared (fingerprint or profile)');
      await this.#discard(b);
      throw new UnavailableError(state ? 'Could not load the profile into the browser; try again' : 'Could not prepare the browser; try again', { cause: err });
    }
    if (input.signal?.aborted) {
      // Nobody will get this answer: the browser would run unseen against the project's cap until its timeout.
      this.#logger.info({ browserId: id }, 'create abandoned by its caller; its browser is ended');
      await this.#discard(b);
      throw new CancelledError('The create was cancelled by its caller');
    }
    if (!row.liveViewUrl) this.#remintUntilMinted(row);
    this.#o.events.publish('started', row);
    this.#logger.info({ browserId: id, projectId: row.projectId, warm, reused: reused !== undefined, sessionId: row.sessionId, runId: row.runId }, 'browser started');
    return row;
  }

  /** Ends a browser whose create failed or was abandoned, and removes its record: it was never handed out. */
  async #discard(b: LiveBrowser): Promise<void> {
    const id = b.id;
    this.#ending.set(id, Promise.resolve(undefined));
    this.#active.delete(id);
    await b.shutdown();
    this.#trackRemoval(b);
    this.#ending.delete(id);
    await this.#o.browsers.delete(id);
  }

  /**
   * Inserts the record under the project's cap. When the project is at its cap, browsers kept only
   * for a session's follow-ups (idle, no run) give up their slot, longest idle first; undefined
   * when every active browser is in real use.
   */
  async #insertWithRoom(b: NewBrowser, at: Date): Promise<BrowserRow | undefined> {
    // Each round frees one slot; concurrent creators may take it, so a few rounds, not one.
    for (let round = 0; round <= this.#o.maxActivePerProject; round++) {
      const row = await this.#o.browsers.insertUnderCap(b, this.#o.maxActivePerProject, at);
      if (row || !(await this.#reclaimIdle(b.projectId))) return row;
    }
    return undefined;
  }

  /** Stops the project's longest idle session browser to free its slot; false when there is none. */
  async #reclaimIdle(projectId: string): Promise<boolean> {
    // Marked stopped first, in one statement, so its slot is free at once and no run can claim it meanwhile.
    const row = await this.#o.browsers.reclaimIdle(projectId, new Date(this.#now()));
    if (!row) return false;
    this.#logger.info({ browserId: row.id, projectId, sessionId: row.sessionId }, 'idle session browser reclaimed for a newer browser');
    const b = this.#active.get(row.id);
    if (b && !this.#ending.has(row.id)) {
      this.#end(b, 'reclaimed', row).catch((err) => this.#logger.error({ err, browserId: row.id }, 'reclaimed browser not shut down'));
    } else {
      // Already ending for another reason (its own end finds it stopped and tells no one), or run by
      // another replica, which is asked to end it now (and would at its next heartbeat anyway).
      this.#o.events.publish('stopped', row);
      if (!b) this.#o.endElsewhere?.(row);
    }
    return true;
  }

  get #profileTimeout(): number {
    return this.#o.profileTimeoutMs ?? 10000;
  }

  /** A live view URL valid an hour past the browser's timeout; null when live-view cannot be reached. */
  async #mintLiveView(projectId: string, browserId: string, timeoutAt: string): Promise<string | null> {
    try {
      const ttl = Math.ceil((Date.parse(timeoutAt) - this.#now()) / 1000) + 3600;
      return await this.#o.liveView.mint(projectId, browserId, ttl);
    } catch (err) {
      this.#logger.warn({ err, browserId }, 'live view URL not minted');
      return null;
    }
  }

  /** Mints a URL again for a browser created without one: one mint per browser at a time, however many reads come while live-view is slow. Never rejects. */
  #remintOnce(row: BrowserRow): Promise<BrowserRow> {
    let minted = this.#reminting.get(row.id);
    if (!minted) {
      minted = this.#remintLiveView(row)
        .catch((err) => {
          this.#logger.warn({ err, browserId: row.id }, 'live view URL not stored');
          return row;
        })
        .finally(() => this.#reminting.delete(row.id));
      this.#reminting.set(row.id, minted);
    }
    return minted;
  }

  /** Mints and stores a live view URL for a browser created without one. */
  async #remintLiveView(row: BrowserRow): Promise<BrowserRow> {
    const url = await this.#mintLiveView(row.projectId, row.id, row.timeoutAt);
    if (!url) return row;
    await this.#o.browsers.setLiveViewUrl(row.id, url);
    const b = this.#active.get(row.id);
    if (b?.row) b.row = { ...b.row, liveViewUrl: url };
    return { ...row, liveViewUrl: url };
  }

  /**
   * A browser created without a live view URL (live-view slow or down) gets one as soon as
   * live-view answers: tried again after `remintFirstMs`, then twice as long each time (at most
   * 30 s apart) while the browser is active here. Reads mint one too when it is still missing.
   */
  #remintUntilMinted(row: BrowserRow): void {
    let wait = this.#o.remintFirstMs ?? 500;
    const attempt = async () => {
      const b = this.#active.get(row.id);
      if (this.#stopped || !b || this.#ending.has(row.id) || b.row?.liveViewUrl) return;
      const minted = !!(await this.#remintOnce(b.row ?? row)).liveViewUrl; // shared with reads asking meanwhile
      if (minted) return this.#logger.info({ browserId: row.id }, 'live view URL minted late');
      const timer = setTimeout(() => void attempt(), wait);
      timer.unref();
      wait = Math.min(wait * 2, 30_000);
    };
    void attempt();
  }

  // ---- read ----

  async #require(projectId: string, id: string): Promise<BrowserRow> {
    const row = id ? await this.#o.browsers.get(projectId, id) : undefined;
    if (!row) throw new NotFoundError('Browser not found');
    return row;
  }

  /** The live browser of an active record of this project; FAILED_PRECONDITION when stopped. */
  async #live(projectId: string, id: string): Promise<LiveBrowser> {
    const b = this.#active.get(id);
    if (b && b.row?.projectId === projectId && !this.#ending.has(id)) return b;
    await this.#require(projectId, id);
    throw new FailedPreconditionError('Browser is not active');
  }

  async get(projectId: string, id: string): Promise<BrowserRow> {
    const row = await this.#require(projectId, id);
    if (row.status === 'active' && !row.liveViewUrl && this.#active.has(id)) return this.#remintOnRead(row);
    return row;
  }

  /**
   * A read of a browser created without a live view URL asks live-view again, but waits at most
   * READ_REMINT_WAIT_MS: a live-view that is slow (a burst of starts) must not make a GET or a list
   * time out. The minting goes on, and the URL is stored for the next read.
   */
  #remintOnRead(row: BrowserRow): Promise<BrowserRow> {
    const minted = this.#remintOnce(row);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<BrowserRow>((r) => (timer = setTimeout(() => r(row), this.#o.readMintWaitMs ?? READ_REMINT_WAIT_MS)));
    return Promise.race([minted, late]).finally(() => clearTimeout(timer));
  }

  async list(projectId: string, f: { status?: BrowserStatus; sessionId?: string; limit: number; cursor: string }): Promise<{ items: BrowserRow[]; nextCursor: string; hasMore: boolean }> {
    const limit = Math.min(Math.max(f.limit || 50, 1), 200);
    const page = await this.#o.browsers.list(projectId, { ...(f.status ? { status: f.status } : {}), ...(f.sessionId ? { sessionId: f.sessionId } : {}), limit, ...(f.cursor ? { cursor: f.cursor } : {}) });
    // A browser created while live-view was down gets its live view URL as soon as it is read.
    const items = await Promise.all(page.items.map((row) => (row.status === 'active' && !row.liveViewUrl && this.#active.has(row.id) ? this.#remintOnRead(row) : row)));
    return { ...page, items };
  }

  /** Browsers of every project, active or stopped since `stoppedSince` (ISO-8601; empty: active only), for the recorder. */
  async listRecordable(f: { stoppedSince: string; limit: number; cursor: string }): Promise<{ items: BrowserRow[]; nextCursor: string }> {
    const since = f.stoppedSince ? new Date(f.stoppedSince) : undefined;
    if (since && Number.isNaN(since.getTime())) throw new InvalidArgumentError('stopped_since must be an ISO-8601 time');
    const limit = Math.min(Math.max(f.limit || 500, 1), 1000);
    const page = await this.#o.browsers.listRecordable({ stoppedSince: since, limit, ...(f.cursor ? { cursor: f.cursor } : {}) });
    return { items: page.items, nextCursor: page.nextCursor };
  }

  /** The public cdpUrl of an active browser (empty once stopped). */
  cdpUrlFor(row: BrowserRow): string {
    if (row.status !== 'active') return '';
    return cdpUrl(this.#o.cdpWsBase, this.#o.signer, row.id, Math.ceil(Date.parse(row.timeoutAt) / 1000) + 60);
  }

  // ---- CdpProxyBackend, and what routing asks ----

  /** True when the browser's process runs here (also while it is stopping): calls about it are answered here. */
  runsHere(browserId: string): boolean {
    return this.#active.has(browserId);
  }

  live(browserId: string): LiveBrowser | undefined {
    const b = this.#active.get(browserId);
    return b && !this.#ending.has(browserId) && b.alive ? b : undefined;
  }

  publicUrl(browser: LiveBrowser): string {
    return this.cdpUrlFor(browser.row!);
  }

  // ---- stop, release, profiles ----

  /** Stops a browser (idempotent): saves its profile, stores its downloads, kills its process group. */
  async stop(projectId: string, id: string, reason: StopReason): Promise<BrowserRow> {
    const b = this.#active.get(id);
    if (b && b.row?.projectId === projectId) return (await this.#end(b, reason)) ?? this.#require(projectId, id);
    const row = await this.#require(projectId, id);
    if (row.status !== 'active') return row;
    // Another replica's browser is stopped by that replica (or reaped once it is dead), never marked from here.
    if (row.instanceId !== this.#o.instanceId) throw new UnavailableError('The browser runs on another pool replica; try again');
    // Active in the database but not running here: a leftover of this instance's previous process; record the truth.
    const stopped = await this.#o.browsers.markStopped(id, reason, new Date(this.#now()));
    if (stopped) this.#o.events.publish('stopped', stopped);
    return stopped ?? this.#require(projectId, id);
  }

  /**
   * The one way a browser ends; concurrent callers share it. Resolves to the stopped record as
   * soon as the session is logically over (recorded stopped, no new CDP connection): its profile
   * capture, the storing of its downloads and the process's exit go on in the background
   * (`#ending` until done; its node slot and uid are held until then, and a create naming its
   * profile waits for the capture). The `stopped` event is announced once the process is gone,
   * so the recording is finalised on every frame there was; frames stamped after the recorded
   * stop are not streamed (the session is over). `marked`: the record was already
   * marked stopped (a reclaim); it is what gets announced.
   */
  #end(b: LiveBrowser, reason: StopReason, marked?: BrowserRow): Promise<BrowserRow | undefined> {
    const ending = this.#stops.get(b.id);
    if (ending) return ending;
    const at = marked?.stoppedAt ? Date.parse(marked.stoppedAt) : this.#now();
    // Nothing the browser shows after its recorded stop goes out (its recording ends there).
    b.screencast.endAt(at);
    const saving = b.row?.profileId && b.chromium.alive ? { projectId: b.row.projectId, profileId: b.row.profileId, since: new Date(this.#now()) } : undefined;
    // The profile is saved after the stop answers: marked first, so that a create or read on another replica waits for it.
    const marking = saving
      ? this.#o.profiles.markSaving(saving.projectId, saving.profileId, this.#o.instanceId, saving.since).catch((err) => this.#logger.warn({ err, browserId: b.id }, 'profile save not marked'))
      : Promise.resolve();
    const stopped = marking.then(() => (marked ? marked : this.#o.browsers.markStopped(b.id, reason, new Date(at))));
    // A create of the project arriving meanwhile waits for this Chromium rather than launching one.
    const reusing = this.#mayReuse(b, reason) ? this.#reusingOf(b.row!.projectId) : undefined;
    if (reusing) reusing.pending++;
    const done = stopped
      .catch((err) => {
        this.#logger.error({ err, browserId: b.id }, 'browser not recorded as stopped');
        return undefined;
      })
      .then(async (row) => {
        let kept = false;
        await b.serialize(async () => {
          if (b.row?.profileId && b.chromium.alive) {
            await this.#saveProfile(b).catch((err) => this.#logger.warn({ err, browserId: b.id }, 'profile not saved at stop'));
          }
          if (saving) await this.#o.profiles.clearSaving(saving.projectId, saving.profileId, this.#o.instanceId, saving.since).catch(() => {});
          await within(this.#o.downloads.sync(b.row!.projectId, b.id, b.chromium.downloadsDir, (f) => b.downloadName(f)), this.#o.downloadSyncTimeoutMs ?? 20000, 'storing downloads').catch((err) =>
            this.#logger.warn({ err, browserId: b.id }, 'downloads not stored at stop'),
          );
          try {
            kept = reusing !== undefined && (await this.#reuse(b));
          } finally {
            if (reusing) {
              reusing.pending--;
              for (const wake of [...reusing.waiters]) wake();
              if (reusing.pending === 0 && reusing.waiters.size === 0 && this.#reusing.get(b.row!.projectId) === reusing) this.#reusing.delete(b.row!.projectId);
            }
          }
          if (!kept) await b.shutdown();
        });
        // A kept Chromium's removal is its next browser's.
        if (!kept) this.#trackRemoval(b);
        this.#active.delete(b.id);
        if (this.#active.size === 0) for (const whenEmpty of this.#whenEmpty) whenEmpty();
        if (row) {
          this.#o.events.publish('stopped', row);
          this.#logger.info({ browserId: b.id, reason }, 'browser stopped');
        }
      });
    this.#ending.set(b.id, done);
    this.#stops.set(b.id, stopped);
    const profile = b.row?.profileId ? this.#profileKey(b.row.projectId, b.row.profileId) : undefined;
    if (profile) this.#profileSaves.set(profile, done);
    void done
      .finally(() => {
        this.#ending.delete(b.id);
        this.#stops.delete(b.id);
        if (profile && this.#profileSaves.get(profile) === done) this.#profileSaves.delete(profile);
      })
      .catch(() => {});
    return stopped;
  }

  /**
   * Keeps a stopped browser's Chromium for its project's next browser (reuseIdleMs): its session's
   * context is disposed and a new one opened under a new browser id, and it waits until a create
   * of the project takes it, its time is up, or a launch needs its node slot. Only a browser a
   * warm one could have been (no proxy, stealth, the default size), stopped while its pool runs on.
   * False when it is not kept: then it is to be shut down (when keeping it failed, it already is).
   */
  async #reuse(b: LiveBrowser): Promise<boolean> {
    const row = b.row!;
    if (this.#stopped || this.#draining || !b.alive) return false;
    let next: LiveBrowser;
    try {
      next = await within(LiveBrowser.reuse(b, this.#launchOptions(newId('brw'), b.width, b.height, undefined, true)), this.#profileTimeout, 'opening a new session in it');
    } catch (err) {
      // LiveBrowser.reuse ends the Chromium when it fails; one that ran out of time is ended here.
      this.#logger.warn({ err, browserId: b.id }, 'browser not kept for reuse');
      await b.chromium.stop();
      await b.egress.stop();
      return false;
    }
    if (this.#stopped || this.#draining) {
      await next.shutdown();
      return false;
    }
    this.#keepReusable(row.projectId, next);
    // One that dies while kept is let go: its egress proxy stops too.
    void next.chromium.exited.then(() => this.#dropReusable(next, true));
    this.#logger.debug({ browserId: b.id, next: next.id, projectId: row.projectId }, 'browser kept for its project\'s next one');
    return true;
  }

  /** Whether a stopping browser's Chromium may be kept (see #reuse). */
  #mayReuse(b: LiveBrowser, reason: StopReason): boolean {
    if ((this.#o.reuseIdleMs ?? 0) <= 0 || !b.row || this.#stopped || this.#draining || !b.alive || !b.contextId) return false;
    if (reason === 'crashed' || reason === 'shutdown' || reason === 'owner_lost') return false;
    return b.proxyCountryCode === null && b.stealth && b.width === this.#o.defaultWidth && b.height === this.#o.defaultHeight;
  }

  #reusingOf(projectId: string): { pending: number; waiters: Set<() => void> } {
    let r = this.#reusing.get(projectId);
    if (!r) this.#reusing.set(projectId, (r = { pending: 0, waiters: new Set() }));
    return r;
  }

  /**
   * A Chromium that a stop of the project is preparing for reuse, once it is ready; undefined when
   * none is coming, it does not come within `maxWaitMs`, or the caller gives up.
   */
  async #awaitReusable(projectId: string, signal: AbortSignal | undefined, maxWaitMs: number): Promise<LiveBrowser | undefined> {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const r = this.#reusing.get(projectId);
      if (!r || r.pending === 0 || signal?.aborted || Date.now() >= deadline) {
        if (r && r.pending === 0 && r.waiters.size === 0) this.#reusing.delete(projectId);
        return this.#takeReusable(projectId);
      }
      let wake!: () => void;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        wake = resolve;
        r.waiters.add(wake);
        timer = setTimeout(resolve, deadline - Date.now());
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      clearTimeout(timer);
      r.waiters.delete(wake);
      const b = this.#takeReusable(projectId);
      if (b) return b;
    }
  }

  #keepReusable(projectId: string, b: LiveBrowser): void {
    const timer = setTimeout(() => this.#dropReusable(b, true), this.#o.reuseIdleMs ?? 0);
    timer.unref();
    this.#reusable.push({ projectId, b, timer });
  }

  /** The project's most recently kept Chromium, if one is still running. */
  #takeReusable(projectId: string): LiveBrowser | undefined {
    for (let i = this.#reusable.length - 1; i >= 0; i--) {
      const kept = this.#reusable[i]!;
      if (kept.projectId !== projectId) continue;
      this.#reusable.splice(i, 1);
      clearTimeout(kept.timer);
      if (kept.b.alive) return kept.b;
      void kept.b.shutdown().catch(() => {});
    }
    return undefined;
  }

  /** Forgets a kept Chromium; `end`: and ends it (its time is up, or it exited: its egress proxy still listens). */
  #dropReusable(b: LiveBrowser, end = false): void {
    const i = this.#reusable.findIndex((k) => k.b === b);
    if (i === -1) return;
    const [kept] = this.#reusable.splice(i, 1);
    clearTimeout(kept!.timer);
    if (end) void b.shutdown().catch((err) => this.#logger.warn({ err, browserId: b.id }, 'kept browser not ended'));
  }

  /** Ends the oldest kept Chromium to free its node slot for a launch; false when there is none. */
  #yieldReusable(): boolean {
    const oldest = this.#reusable[0];
    if (!oldest) return false;
    this.#dropReusable(oldest.b, true);
    return true;
  }

  /** Ends every kept Chromium (a drain or shutdown). */
  async #endReusable(): Promise<void> {
    const all = this.#reusable.splice(0);
    for (const k of all) clearTimeout(k.timer);
    await Promise.all(all.map((k) => k.b.shutdown().then(() => k.b.chromium.removed)));
  }

  /** `#end`, resolved only once the browser is all gone (for the reaper and shutdown: no client waits on them). */
  async #endFully(b: LiveBrowser, reason: StopReason): Promise<void> {
    const stopped = this.#end(b, reason).catch(() => undefined);
    await Promise.all([stopped, this.#ending.get(b.id)]);
  }

  /**
   * Resolves once the saves of the profile (or of every profile of the project) by stops that
   * already answered are done: a read of a profile right after a stop shows what the stop saved.
   */
  async profileSaved(projectId: string, profileId?: string, maxWaitMs = Infinity): Promise<void> {
    const key = profileId ? this.#profileKey(projectId, profileId) : undefined;
    const pending = [...this.#profileSaves].filter(([k]) => (key ? k === key : k.startsWith(`${projectId}/`))).map(([, done]) => done);
    await Promise.all(pending.map((p) => p.catch(() => {})));
    // A stop on another replica may be saving it: wait while that replica is registered (reaped: what
    // it saved is what there is), no longer than a save may take, nor than the caller has.
    const boundMs = this.#profileTimeout + 2000;
    const after = new Date(this.#now() - boundMs);
    const deadline = Date.now() + Math.min(boundMs, maxWaitMs);
    while (Date.now() < deadline && (await this.#o.profiles.savingElsewhere(projectId, profileId, this.#o.instanceId, after))) await new Promise((r) => setTimeout(r, 100));
  }

  #profileKey(projectId: string, profileId: string): string {
    return `${projectId}/${profileId}`;
  }

  #trackRemoval(b: LiveBrowser): void {
    const removal = b.chromium.removed;
    this.#removals.add(removal);
    void removal.finally(() => this.#removals.delete(removal));
  }

  async #saveProfile(b: LiveBrowser): Promise<ProfileRow | undefined> {
    const row = b.row!;
    const state = await within(captureProfileState(b.chromium.conn, b.contextId, b.tabs.origins, this.#profileTimeout), this.#profileTimeout, 'saving the profile');
    const saved = await this.#o.profiles.save(row.projectId, row.profileId!, state);
    this.#logger.debug({ browserId: b.id, profileId: row.profileId, cookies: state.cookies.length, origins: state.origins.length }, 'profile saved');
    return saved;
  }

  /** A run is done with the browser: clears its run id (when it matches) and saves the profile; the browser stays. */
  async release(projectId: string, id: string, runId: string): Promise<BrowserRow> {
    const row = await this.#require(projectId, id);
    const b = this.#active.get(id);
    if (!b || row.status !== 'active' || this.#ending.has(id)) return row;
    return b.serialize(async () => {
      const updated = (await this.#o.browsers.releaseRun(id, runId, new Date(this.#now()))) ?? row;
      b.row = updated;
      b.touch();
      if (updated.profileId && b.chromium.alive) await this.#saveProfile(b).catch((err) => this.#logger.warn({ err, browserId: id }, 'profile not saved at release'));
      return updated;
    });
  }

  /**
   * A session's next run takes the browser kept for it, so it is in use (not reclaimed, not idle)
   * until released; FAILED_PRECONDITION when it was stopped or reclaimed meanwhile.
   */
  async claim(projectId: string, id: string, runId: string): Promise<BrowserRow> {
    const b = await this.#live(projectId, id);
    const row = await this.#o.browsers.claimForRun(id, runId);
    if (!row) throw new FailedPreconditionError('Browser is not active');
    b.row = row;
    b.touch();
    return row;
  }

  /** Flushes the browser's cookies and localStorage into its profile; undefined when it has none. */
  async saveProfileState(projectId: string, id: string): Promise<ProfileRow | undefined> {
    const b = await this.#live(projectId, id);
    if (!b.row?.profileId) return undefined;
    try {
      return await b.serialize(() => this.#saveProfile(b));
    } catch (err) {
      throw new UnavailableError('Could not read the browser state; try again', { cause: err });
    }
  }

  // ---- for other services ----

  /** Where other services reach the CDP proxy, once it listens (when CDP_INTERNAL_URL does not say). */
  useCdpInternalBase(base: string): void {
    this.#cdpInternalBase ??= base;
  }

  async cdpEndpoint(projectId: string, id: string): Promise<string> {
    const b = await this.#live(projectId, id);
    b.touch();
    if (!this.#cdpInternalBase) throw new UnavailableError('The CDP proxy is not listening yet');
    return cdpUrl(this.#cdpInternalBase, this.#o.signer, id, Math.ceil(Date.parse(b.row!.timeoutAt) / 1000) + 60);
  }

  /**
   * Feeds frames to `onFrame` until the browser stops or `until` resolves. A stopped browser yields
   * none. A passive stream (a recorder) is not use: it neither holds the browser nor refreshes its idle clock.
   */
  async streamFrames(projectId: string, id: string, onFrame: (f: Frame) => void, until: Promise<void>, opts: { passive?: boolean } = {}): Promise<void> {
    const b = this.#active.get(id);
    if (!b || b.row?.projectId !== projectId || this.#ending.has(id)) {
      await this.#require(projectId, id);
      return;
    }
    const passive = !!opts.passive;
    const unsubscribe = b.screencast.subscribe(onFrame, { passive });
    if (!passive) b.touch();
    // The recorder is told every second that the browser still lives (it cuts a still screen's parts up to there, never past the stop).
    const alive = passive ? setInterval(() => b.screencast.clock(onFrame), ALIVE_EVERY_MS) : undefined;
    try {
      await Promise.race([b.ending, until, this.#streamsEnded]);
    } finally {
      clearInterval(alive);
      unsubscribe();
      if (!passive) b.touch();
    }
  }

  async input(projectId: string, id: string, input: BrowserInput): Promise<void> {
    await dispatchInput(await this.#live(projectId, id), input);
  }

  async downloads(projectId: string, id: string): Promise<ListedDownload[]> {
    await this.#require(projectId, id);
    const b = this.#active.get(id);
    if (b && !this.#ending.has(id) && b.chromium.alive) await this.#o.downloads.sync(projectId, id, b.chromium.downloadsDir, (f) => b.downloadName(f));
    else await this.#ending.get(id);
    return this.#o.downloads.list(projectId, id);
  }

  // ---- reaping and shutdown ----

  /** Stops browsers past their timeout and idle ones (no client, viewer, input or run for the idle timeout). */
  async reap(): Promise<void> {
    const now = this.#now();
    const idleMs = this.#o.idleTimeoutSeconds * 1000;
    const ends: Promise<unknown>[] = [];
    for (const b of this.#active.values()) {
      if (!b.row || this.#ending.has(b.id)) continue;
      if (now >= Date.parse(b.row.timeoutAt)) ends.push(this.#endFully(b, 'timeout'));
      else if (idleMs > 0 && !b.inUse && now - b.lastActivity >= idleMs) ends.push(this.#endFully(b, 'idle'));
    }
    await Promise.all(ends);
  }

  /** Announces browsers of a dead instance that this replica reaped (recorded stopped, owner_lost). */
  announceReaped(rows: BrowserRow[]): void {
    for (const row of rows) {
      this.#o.events.publish('stopped', row);
      this.#logger.info({ browserId: row.id, projectId: row.projectId, instanceId: row.instanceId }, 'browser of a dead pool instance recorded stopped');
    }
  }

  /**
   * Ends the browsers running here whose records say stopped elsewhere: an idle session browser
   * reclaimed by another replica for a newer one, or every browser when this instance was taken
   * for dead and reaped. Their stop was announced by whoever recorded it. Runs at every heartbeat.
   */
  async endStoppedElsewhere(): Promise<void> {
    const here = [...this.#active.keys()].filter((id) => !this.#ending.has(id));
    const ends: Promise<unknown>[] = [];
    for (const row of await this.#o.browsers.stoppedAmong(here)) {
      const b = this.#active.get(row.id);
      if (!b || this.#ending.has(row.id)) continue;
      // Its session ended when it was recorded stopped (its stop was announced by whoever recorded it, not again here).
      if (row.stoppedAt) b.screencast.endAt(Date.parse(row.stoppedAt));
      ends.push(this.#endFully(b, row.stopReason ?? 'owner_lost'));
    }
    await Promise.all(ends);
  }

  get draining(): boolean {
    return this.#draining || this.#stopped;
  }

  /**
   * The first step of a graceful shutdown: takes no new browsers (warm ones are stopped) and waits
   * up to `timeoutMs` for the active ones to end on their own (clients finish, runs end, timeouts).
   * Resolves true when none is left.
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.#draining = true;
    await Promise.all([this.#warm.stop(), this.#endReusable()]);
    if (this.#active.size === 0) return true;
    this.#logger.info({ browsers: this.#active.size, timeoutMs }, 'draining: waiting for active browsers to end');
    let done!: () => void;
    let timer: NodeJS.Timeout | undefined;
    const empty = new Promise<boolean>((resolve) => {
      done = () => resolve(true);
      this.#whenEmpty.add(done);
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await empty;
    } finally {
      clearTimeout(timer);
      this.#whenEmpty.delete(done);
    }
  }

  /** Resolves when frame streams are ended for the shutdown (streams relayed from other replicas end then too). */
  get streamsEnded(): Promise<void> {
    return this.#streamsEnded;
  }

  /** Ends every frame stream (first step of a shutdown: viewers must not hold the gRPC drain up). */
  endStreams(): void {
    this.#endStreams();
  }

  /**
   * Leaves every handed-out browser running for the next process of this instance (its record
   * stays active and this instance's; see #recover) and stops the warm ones. Idempotent.
   */
  detachAll(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopped = true;
      this.#leaving = true;
      if (this.#reaper) clearInterval(this.#reaper);
      await Promise.all([this.#warm.stop(), this.#endReusable(), ...[...this.#active.values()].filter((b) => !this.#ending.has(b.id)).map((b) => b.serialize(() => b.detach()))]);
      await Promise.all([...this.#ending.values()]);
      await Promise.all(this.#removals);
    })();
    return this.#stopping;
  }

  /** Stops every browser (profiles saved, records stopped) and the warm pool. Idempotent. */
  stopAll(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopped = true;
      if (this.#reaper) clearInterval(this.#reaper);
      await Promise.all([this.#warm.stop(), this.#endReusable(), ...[...this.#active.values()].map((b) => this.#endFully(b, 'shutdown'))]);
      await Promise.all(this.#ending.values());
      await this.#endReusable();
      await Promise.all(this.#removals);
    })();
    return this.#stopping;
  }
}
