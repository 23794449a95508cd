/**
 * Every browser lives in one pool replica (its owner, named in its row). A call about a browser
 * that lands on another replica is forwarded to the owner over gRPC, carrying the request id, the
 * internal token and a header naming the owner, so a forwarded call is never forwarded again (and
 * one that reaches a replica that is not the owner any more, e.g. a reused pod address, is refused
 * rather than acted on). A replica never decides about a browser it does not run: it asks the
 * owner, or, when the owner is dead (no heartbeat within the timeout), reaps it first, after which
 * the browser is recorded stopped and the local answer is the stopped one.
 */
import type * as grpc from '@grpc/grpc-js';
import { fromServiceError, RemoteError, Status, UnavailableError } from '../../common/src/errors.js';
import type { CallOptions } from '../../common/src/grpc.js';
import { StopReason } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import type { Logger } from '../../common/src/logger.js';
import type { BrowserRepository, BrowserRow } from './browser.repository.js';
import type { InstanceRow } from './instance.repository.js';
import type { Instances, PeerClient } from './instances.js';

/** gRPC metadata (and HTTP header, on the CDP proxy) of a forwarded call: the id of the instance it is meant for. */
export const FORWARDED_TO_HEADER = 'x-ats-forwarded-to';

/** Where a call about a browser is answered. */
export type Route = { kind: 'local' } | { kind: 'peer'; owner: InstanceRow; client: PeerClient };

const LOCAL: Route = { kind: 'local' };
/** Browsers whose owner was looked up (an owner never changes); bounded, oldest dropped first. */
const OWNER_CACHE_SIZE = 10_000;

/** The part of a server call the router reads. */
export interface IncomingCall {
  metadata: grpc.Metadata;
  getDeadline?(): grpc.Deadline;
}

export interface OwnerRouterOptions {
  /** True when the browser's process runs in this replica. */
  runsHere(browserId: string): boolean;
  browsers: BrowserRepository;
  instances: Instances;
  logger: Logger;
  now?: () => number;
}

/** The instance a forwarded call is meant for; undefined when the call was not forwarded. */
export function forwardedTo(md: grpc.Metadata | undefined): string | undefined {
  const v = md?.get(FORWARDED_TO_HEADER)[0];
  return typeof v === 'string' ? v : undefined;
}

/** Decides, per call, whether this replica answers about a browser or forwards to its owner. */
/** What is left of an incoming call's deadline, in ms (Infinity when it has none). */
export function timeLeftMs(call: { getDeadline?(): grpc.Deadline }): number {
  const d = call.getDeadline?.();
  const deadline = d instanceof Date ? d.getTime() : typeof d === 'number' ? d : Infinity;
  return deadline - Date.now();
}

export class OwnerRouter {
  readonly #o: OwnerRouterOptions;
  readonly #now: () => number;
  readonly #owners = new Map<string, string>();

  constructor(o: OwnerRouterOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  /**
   * Where a call about `browserId` is answered: here when the browser runs here, is not active, is
   * unknown (in this project), was left by this instance's previous process, or its owner is dead
   * (reaped first); at its owner otherwise. `projectId` undefined: any project (the CDP proxy,
   * whose token names the browser). A forwarded call (`to`: the instance it was sent to) is
   * answered here, and only by its addressee.
   */
  async route(projectId: string | undefined, browserId: string, to: string | undefined): Promise<Route> {
    if (to !== undefined) {
      if (to !== this.#o.instances.id) throw new UnavailableError('The browser is on another pool replica; try again');
      return LOCAL;
    }
    if (!browserId || this.#o.runsHere(browserId)) return LOCAL;
    const cached = this.#owners.get(browserId);
    if (cached) {
      const owner = await this.#o.instances.lookup(cached);
      if (owner && this.#o.instances.alive(owner)) return this.#peer(owner);
      this.#owners.delete(browserId); // decided below from the record
    }
    const row = projectId === undefined ? await this.#o.browsers.byId(browserId) : await this.#o.browsers.get(projectId, browserId);
    if (!row || row.status !== 'active' || row.instanceId === this.#o.instances.id) return LOCAL;
    const owner = await this.#liveOwner(row.instanceId, Date.parse(row.createdAt));
    if (!owner) return LOCAL;
    this.#remember(browserId, owner.id);
    return this.#peer(owner);
  }

  #peer(owner: InstanceRow): Route {
    return { kind: 'peer', owner, client: this.#o.instances.client(owner) };
  }

  #remember(browserId: string, ownerId: string): void {
    if (this.#owners.size >= OWNER_CACHE_SIZE) this.#owners.delete(this.#owners.keys().next().value!);
    this.#owners.set(browserId, ownerId);
  }

  /**
   * The owner when it is alive (asked of the database afresh before it is judged dead); undefined
   * once a dead owner was reaped (its browsers are stopped then). A browser younger than the timeout
   * whose owner has no row may belong to an instance still registering: not judged yet.
   */
  async #liveOwner(ownerId: string, createdAt: number): Promise<InstanceRow | undefined> {
    const { instances } = this.#o;
    for (const fresh of [false, true]) {
      const owner = await instances.lookup(ownerId, { fresh });
      if (owner && instances.alive(owner)) return owner;
      if (fresh && !owner && this.#now() - createdAt < instances.heartbeatTimeoutMs) {
        throw new UnavailableError('The pool replica running this browser is not reachable yet; try again');
      }
    }
    this.#o.logger.warn({ instanceId: ownerId }, 'the pool instance owning a browser is dead; reaping it');
    await instances.reap();
    return undefined;
  }

  /** Options of a call forwarded to `owner`: what is left of the caller's deadline, and the header naming the owner. */
  #forwardOptions(owner: InstanceRow, call: IncomingCall): CallOptions {
    const ms = timeLeftMs(call);
    const left = Number.isFinite(ms) ? Math.max(ms - 20, 1) : undefined;
    return { ...(left !== undefined ? { deadlineMs: left } : {}), metadata: { [FORWARDED_TO_HEADER]: owner.id } };
  }

  /**
   * Runs a unary call about a browser where the browser is: `local` here, or `remote` on the
   * owner's client. An owner that cannot be reached is asked about again: dead → reaped and
   * answered here (as stopped); moved to a new address → tried once more there.
   */
  async call<T>(req: { projectId: string; browserId: string }, call: IncomingCall, remote: (client: PeerClient, opts: CallOptions) => Promise<T>, local: () => Promise<T>): Promise<T> {
    let route = await this.route(req.projectId, req.browserId, forwardedTo(call.metadata));
    for (let attempt = 1; ; attempt++) {
      if (route.kind === 'local') return local();
      try {
        return await remote(route.client, this.#forwardOptions(route.owner, call));
      } catch (err) {
        if (!(err instanceof RemoteError && err.code === Status.UNAVAILABLE) || attempt > 1) throw err;
        const again = await this.#afterUnreachable(route.owner, req.browserId);
        // Alive at the same address: down for a moment (or killed, not yet expired); the caller tries again.
        if (again.kind === 'peer' && again.owner.grpcAddr === route.owner.grpcAddr) throw err;
        route = again;
      }
    }
  }

  /** After an owner did not answer: local when it is dead (reaped now), the owner at its current address otherwise. */
  async #afterUnreachable(owner: InstanceRow, browserId: string): Promise<Route> {
    const now = await this.#o.instances.lookup(owner.id, { fresh: true });
    // Alive by its heartbeat: unless its address refuses connections (the process is gone, reaped now).
    if (now && this.#o.instances.alive(now) && !(await this.#o.instances.confirmDead(now.id))) return this.#peer(now);
    this.#owners.delete(browserId);
    await this.#o.instances.reap();
    return LOCAL;
  }

  /**
   * A server stream about a browser, from where the browser is: `local` here, or the owner's stream
   * passed through message by message (`write`) until it ends or `ended` (the caller went away)
   * cancels it. An owner lost mid-stream ends the stream (as a stopped browser's does).
   */
  async stream<T>(
    req: { projectId: string; browserId: string },
    call: IncomingCall,
    open: (client: PeerClient, opts: CallOptions) => grpc.ClientReadableStream<T>,
    write: (msg: T) => void,
    ended: Promise<void>,
    local: () => Promise<void>,
  ): Promise<void> {
    const route = await this.route(req.projectId, req.browserId, forwardedTo(call.metadata));
    if (route.kind === 'local') return local();
    const { metadata } = this.#forwardOptions(route.owner, call);
    const upstream = open(route.client, { metadata: metadata! });
    void ended.then(() => upstream.cancel());
    await new Promise<void>((resolve, reject) => {
      upstream.on('data', write);
      upstream.on('end', () => resolve());
      upstream.on('error', (err: grpc.ServiceError) => {
        if (err.code === Status.CANCELLED) return resolve();
        if (err.code !== Status.UNAVAILABLE) return reject(fromServiceError(err)); // the owner's verdict, passed on
        // The owner went away: reaped now if it is dead, so the browser reads as stopped afterwards.
        this.#afterUnreachable(route.owner, req.browserId).then(() => resolve(), () => resolve());
      });
    });
  }

  /**
   * The owner of a browser could not be reached (the CDP edge's relay failed or was cut): when its
   * process is gone, it is reaped now, so the browser reads stopped rather than active with a 502.
   */
  ownerUnreachable(ownerId: string): void {
    void this.#o.instances.confirmDead(ownerId);
  }

  /**
   * Whether a record that says `active` on another replica is stale: its owner missed a heartbeat
   * and refuses connections (reaped now). The caller reads the record again.
   */
  async ownerLost(row: BrowserRow): Promise<boolean> {
    if (row.status !== 'active' || row.instanceId === this.#o.instances.id || this.#o.runsHere(row.id)) return false;
    const owner = await this.#o.instances.lookup(row.instanceId);
    if (owner && this.#now() - Date.parse(owner.heartbeatAt) <= 1.5 * this.#o.instances.heartbeatIntervalMs) return false;
    return this.#o.instances.confirmDead(row.instanceId);
  }

  /**
   * The owner (its id and the ws:// base of its CDP proxy) when another live replica runs the
   * browser; undefined when the CDP proxy answers here. `to`: the instance a forwarded connection was sent to.
   */
  async cdpOwner(browserId: string, to: string | undefined): Promise<{ id: string; cdpUrl: string } | undefined> {
    const route = await this.route(undefined, browserId, to);
    return route.kind === 'peer' ? { id: route.owner.id, cdpUrl: route.owner.cdpUrl } : undefined;
  }

  /**
   * Asks the owner of a browser that this replica recorded stopped (a reclaimed one) to end it now;
   * its stop finds the record stopped and announces nothing more. Failures are only logged: the
   * owner ends it at its next heartbeat anyway.
   */
  endAtOwner(row: BrowserRow): void {
    void (async () => {
      const owner = await this.#o.instances.lookup(row.instanceId);
      if (!owner || owner.id === this.#o.instances.id || !this.#o.instances.alive(owner)) return;
      await this.#o.instances.client(owner).api.stopBrowser({ projectId: row.projectId, browserId: row.id, reason: StopReason.STOP_REASON_RECLAIMED }, { metadata: { [FORWARDED_TO_HEADER]: owner.id } });
    })().catch((err: Error) => this.#o.logger.warn({ browserId: row.id, instanceId: row.instanceId, err: err.message }, 'the owner of a reclaimed browser was not reached; it ends the browser at its next heartbeat'));
  }

  /** A live peer that takes new browsers (for a draining replica's creates), with the options to forward `call`; undefined when there is none. */
  async peerForCreate(call: IncomingCall): Promise<{ client: PeerClient; opts: CallOptions } | undefined> {
    const peers = await this.#o.instances.acceptingPeers();
    const peer = peers[Math.floor(Math.random() * peers.length)];
    return peer && { client: this.#o.instances.client(peer), opts: this.#forwardOptions(peer, call) };
  }
}
