/**
 * The pool replicas as one pool: this instance registers itself (how its peers reach its gRPC
 * server and its CDP proxy), renews a heartbeat, and reaps peers whose heartbeat expired (their
 * browsers are recorded stopped, `owner_lost`). It keeps a short-lived directory of the
 * instances and one gRPC client per peer, made when first needed and closed when the peer leaves.
 * Liveness is judged by heartbeat age alone, with the clocks of the replicas (kept in step by NTP;
 * they must agree to well within the timeout).
 */
import net from 'node:net';
import { createServiceClient, type InternalToken, type ServiceClient } from '../../common/src/grpc.js';
import type { Logger } from '../../common/src/logger.js';
import { BrowserPoolServiceService } from '../../../gen/ats/browserpool/v1/browser_pool.js';
import type { InstanceAddress, InstanceRepository, InstanceRow, Reaped } from './instance.repository.js';

/** How long a probe of a peer's address waits for the connection to be accepted or refused. */
const PROBE_TIMEOUT_MS = 1000;

/**
 * True when a TCP connection to `address` (host:port) is refused: nothing listens there. Accepted,
 * timed out or any other failure (unreachable network, DNS): false, not proof of death.
 */
export function refuses(address: string, timeoutMs: number): Promise<boolean> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(at + 1));
  if (at < 0 || !Number.isInteger(port)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (refused: boolean) => {
      socket.destroy();
      resolve(refused);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(false));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED'));
  });
}

/** A client of a peer's gRPC server. */
export type PeerClient = ServiceClient<typeof BrowserPoolServiceService>;

export interface InstancesOptions {
  repo: InstanceRepository;
  /** This instance's id (stable per pod: a restart under it resumes its row and stops its leftovers). */
  id: string;
  heartbeatIntervalMs: number;
  /** A peer whose heartbeat is older than this is dead. */
  heartbeatTimeoutMs: number;
  /**
   * How long a peer that refuses connections may be restarting (its browsers outlive it and its
   * next process takes them over: POOL_KEEP_BROWSERS_ON_EXIT): it is not reaped for refusing
   * until its heartbeat is that old. 0: a refusing peer is dead at once.
   */
  restartGraceMs?: number;
  /** The deployment credential; every forwarded call carries it. */
  token: InternalToken;
  grpcDeadlineMs: number;
  logger: Logger;
  now?: () => number;
  /** What each reaping pass took (the pool announces the stopped browsers). */
  onReaped(r: Reaped): void;
  /**
   * After each heartbeat: the pool ends what it runs but another replica recorded stopped (a
   * reclaimed browser; every one when peers took this instance for dead, e.g. after a pause longer
   * than the timeout, and reaped it: it registers again first).
   */
  onBeat(): Promise<void> | void;
  /** Makes a peer's client (tests substitute it). */
  connect?(address: string): PeerClient;
}

/** This instance's membership of the pool, and its view of the others. */
export class Instances {
  readonly id: string;
  readonly #o: InstancesOptions;
  readonly #now: () => number;
  readonly #clients = new Map<string, { address: string; client: PeerClient }>();
  #self: InstanceAddress | undefined;
  #directory = new Map<string, InstanceRow>();
  #readAt = -Infinity;
  #reading: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Renews the row while a restarted process takes its browsers over (resume → start). */
  #resuming: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #stopped = false;
  #draining = false;
  readonly #probing = new Map<string, Promise<boolean>>();

  constructor(o: InstancesOptions) {
    this.id = o.id;
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  get heartbeatIntervalMs(): number {
    return this.#o.heartbeatIntervalMs;
  }

  get heartbeatTimeoutMs(): number {
    return this.#o.heartbeatTimeoutMs;
  }

  /** Registers this instance at the addresses its peers reach it on, then renews and reaps every interval. */
  async start(self: Omit<InstanceAddress, 'id'>): Promise<void> {
    clearInterval(this.#resuming);
    this.#self = { id: this.id, ...self };
    await this.#o.repo.register(this.#self, new Date(this.#now()));
    this.#o.logger.info({ instanceId: this.id, grpcAddr: self.grpcAddr, cdpBase: self.cdpUrl }, 'pool instance registered');
    this.#timer = setInterval(() => void this.tick(), this.#o.heartbeatIntervalMs);
    this.#timer.unref();
  }

  /**
   * The first thing a (re)started process does: renews the heartbeat of this instance's row if a
   * previous process left it, so peers do not take the instance for dead while this process takes
   * its browsers over. False when there is no row (first start, or reaped: its browsers are stopped).
   */
  async resume(): Promise<boolean> {
    const found = await this.#o.repo.heartbeat(this.id, new Date(this.#now()));
    // Taking many browsers over can outlast the heartbeat timeout: the row is renewed meanwhile, until start() beats.
    if (found && !this.#stopped && !this.#resuming) {
      this.#resuming = setInterval(() => void this.#o.repo.heartbeat(this.id, new Date(this.#now())).catch((err) => this.#o.logger.warn({ err }, 'heartbeat during takeover failed')), this.#o.heartbeatIntervalMs);
      this.#resuming.unref();
    }
    return found;
  }

  /** One heartbeat and one reaping pass (what the timer does; tests call it). Never throws. */
  tick(): Promise<void> {
    this.#ticking ??= (async () => {
      try {
        await this.#beat();
        await this.reap();
        await this.#read(true); // peers that left or were reaped elsewhere: their clients are closed
        await this.#probeLate();
      } catch (err) {
        this.#o.logger.warn({ err }, 'pool heartbeat or reaping failed');
      } finally {
        this.#ticking = undefined;
      }
    })();
    return this.#ticking;
  }

  async #beat(): Promise<void> {
    if (!this.#self || this.#stopped) return;
    if (!(await this.#o.repo.heartbeat(this.id, new Date(this.#now())))) {
      this.#o.logger.warn({ instanceId: this.id }, 'this pool instance was taken for dead by its peers; registering again and ending the browsers they recorded stopped');
      await this.#o.repo.register(this.#self, new Date(this.#now()));
      if (this.#draining) await this.#o.repo.setDraining(this.id); // still shutting down: peers send it nothing new
    }
    await this.#o.onBeat();
  }

  /** Reaps every peer whose heartbeat expired (and their browsers); safe to run on every replica at once. */
  async reap(): Promise<Reaped> {
    const now = this.#now();
    const reaped = await this.#o.repo.reapExpired(this.id, new Date(now - this.#o.heartbeatTimeoutMs), new Date(now));
    if (reaped.instances.length || reaped.browsers.length) {
      this.#o.logger.warn({ instances: reaped.instances, browsers: reaped.browsers.length }, 'reaped dead pool instances; their browsers are recorded stopped');
      for (const id of reaped.instances) this.#directory.delete(id);
      this.#closeGone();
      this.#o.onReaped(reaped);
    }
    return reaped;
  }

  /**
   * Judges a peer dead before its heartbeat expires when its address refuses connections (nothing
   * listens there: the process is gone), and reaps it now, so its browsers read `stopped
   * (owner_lost)` at once instead of `active` until the timeout. A peer that does not answer at
   * all (a silent node, no RST) is left to the heartbeat timeout: silence is no proof. Concurrent
   * asks about one peer share one probe. Resolves true when the peer is gone (reaped now or before).
   */
  confirmDead(id: string): Promise<boolean> {
    if (id === this.id || this.#stopped) return Promise.resolve(false);
    let p = this.#probing.get(id);
    if (!p) {
      p = this.#confirmDead(id)
        .catch((err) => {
          this.#o.logger.warn({ err, instanceId: id }, 'could not judge whether a pool instance is dead');
          return false;
        })
        .finally(() => this.#probing.delete(id));
      this.#probing.set(id, p);
    }
    return p;
  }

  async #confirmDead(id: string): Promise<boolean> {
    const peer = await this.lookup(id, { fresh: true });
    if (!peer) return true;
    if (this.#now() - Date.parse(peer.heartbeatAt) < (this.#o.restartGraceMs ?? 0)) return false; // maybe restarting: its next process takes its browsers over
    if (!(await refuses(peer.grpcAddr, PROBE_TIMEOUT_MS))) return false;
    const reaped = await this.#o.repo.reapDead(id, new Date(peer.heartbeatAt), new Date(this.#now()));
    if (!reaped.instances.length) return false; // it beat again meanwhile
    this.#o.logger.warn({ instanceId: id, browsers: reaped.browsers.length }, 'a pool instance refuses connections: reaped before its heartbeat expired; its browsers are recorded stopped');
    this.#directory.delete(id);
    this.#closeGone();
    this.#o.onReaped(reaped);
    return true;
  }

  /** Peers that missed a heartbeat (older than one and a half intervals) are probed at each tick. */
  async #probeLate(): Promise<void> {
    const late = [...this.#directory.values()].filter((i) => i.id !== this.id && this.#now() - Date.parse(i.heartbeatAt) > 1.5 * this.#o.heartbeatIntervalMs);
    await Promise.all(late.map((i) => this.confirmDead(i.id)));
  }

  /** True while the instance's heartbeat is within the timeout. */
  alive(i: InstanceRow): boolean {
    return this.#now() - Date.parse(i.heartbeatAt) < this.#o.heartbeatTimeoutMs;
  }

  /**
   * An instance as the directory knows it: read again when older than a heartbeat interval, or at
   * once with `fresh` (before anything is concluded from an instance being gone or silent).
   */
  async lookup(id: string, o: { fresh?: boolean } = {}): Promise<InstanceRow | undefined> {
    await this.#read(o.fresh ?? false);
    return this.#directory.get(id);
  }

  /** Live peers taking new browsers (for a draining instance to hand its creates to). */
  async acceptingPeers(): Promise<InstanceRow[]> {
    await this.#read(false);
    return [...this.#directory.values()].filter((i) => i.id !== this.id && !i.draining && this.alive(i));
  }

  async #read(fresh: boolean): Promise<void> {
    // A directory a heartbeat old is fresh enough to route by: nothing is judged dead, and no new
    // instance is taken for missing, without a fresh read.
    if (!fresh && this.#now() - this.#readAt < this.#o.heartbeatIntervalMs) return;
    // Concurrent lookups share one read.
    this.#reading ??= this.#o.repo
      .all()
      .then((rows) => {
        this.#directory = new Map(rows.map((r) => [r.id, r]));
        this.#readAt = this.#now();
        this.#closeGone();
      })
      .finally(() => (this.#reading = undefined));
    await this.#reading;
  }

  /** Closes the clients of peers that left (or moved to another address). */
  #closeGone(): void {
    for (const [id, c] of this.#clients) {
      if (this.#directory.get(id)?.grpcAddr === c.address) continue;
      c.client.close();
      this.#clients.delete(id);
    }
  }

  /** The client of a peer, made on first use. */
  client(peer: InstanceRow): PeerClient {
    const have = this.#clients.get(peer.id);
    if (have?.address === peer.grpcAddr) return have.client;
    have?.client.close();
    const client = this.#o.connect?.(peer.grpcAddr) ?? createServiceClient(BrowserPoolServiceService, peer.grpcAddr, this.#o.grpcDeadlineMs, this.#o.token);
    this.#clients.set(peer.id, { address: peer.grpcAddr, client });
    return client;
  }

  /** Tells peers this instance takes no new browsers (the first step of a graceful shutdown). */
  async drain(): Promise<void> {
    this.#draining = true;
    if (this.#self) await this.#o.repo.setDraining(this.id);
  }

  /**
   * Stops renewing, removes this instance's row (its browsers are stopped by then) and closes the
   * peers' clients. Idempotent. `keepRow`: the browsers were left for the next process, which
   * resumes the row; if none comes, peers reap it (and them) when its heartbeat expires.
   */
  async stop(o: { keepRow?: boolean } = {}): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#resuming);
    if (this.#timer) clearInterval(this.#timer);
    await this.#ticking;
    if (this.#self && !o.keepRow) await this.#o.repo.deregister(this.id);
    for (const c of this.#clients.values()) c.client.close();
    this.#clients.clear();
  }
}
