/**
 * gRPC helpers: a server that wraps promise-returning handlers (missing methods answer
 * UNIMPLEMENTED), refuses calls without the deployment's internal token (UNAUTHENTICATED),
 * hosts the standard health service, and a typed promise client whose every call carries the
 * token and every unary call a deadline. A call's `x-request-id` is its request context on the
 * server (every log line of the call carries it) and is sent on by every call a client makes in it.
 */
import * as grpc from '@grpc/grpc-js';
import {
  HealthService,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '../../../gen/grpc/health/v1/health.js';
import { AppError, RemoteError, UnimplementedError, fromServiceError, toServiceError } from './errors.js';
import type { InternalToken } from './internal-token.js';
import { currentRequestId, REQUEST_ID_HEADER, withRequestId, type Logger } from './logger.js';

export { ServingStatus };
export type { InternalToken };

/** The shape ts-proto gives one method of a `…Service` definition. */
export interface MethodDef {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly originalName?: string;
  requestSerialize(value: any): Buffer;
  requestDeserialize(value: Buffer): any;
  responseSerialize(value: any): Buffer;
  responseDeserialize(value: Buffer): any;
}
export type ServiceDef = { readonly [method: string]: MethodDef };

type Req<M> = M extends { requestDeserialize(value: Buffer): infer R } ? R : never;
type Res<M> = M extends { responseDeserialize(value: Buffer): infer R } ? R : never;

/** Promise-returning handlers for a definition; any left out answer UNIMPLEMENTED. */
export type Handlers<D extends ServiceDef> = {
  [K in keyof D]?: D[K]['requestStream'] extends true
    ? D[K]['responseStream'] extends true
      ? (call: grpc.ServerDuplexStream<Req<D[K]>, Res<D[K]>>) => Promise<void>
      : (call: grpc.ServerReadableStream<Req<D[K]>, Res<D[K]>>) => Promise<Res<D[K]>>
    : D[K]['responseStream'] extends true
      ? (request: Req<D[K]>, call: grpc.ServerWritableStream<Req<D[K]>, Res<D[K]>>) => Promise<void>
      : (request: Req<D[K]>, call: grpc.ServerUnaryCall<Req<D[K]>, Res<D[K]>>) => Promise<Res<D[K]>>;
};

function methodName(def: MethodDef): string {
  return def.originalName ?? def.path.slice(def.path.lastIndexOf('/') + 1);
}

function logFailure(logger: Logger, method: string, err: unknown): void {
  if (err instanceof RemoteError) logger.warn({ method, code: err.code, err: err.message }, 'downstream call failed');
  else if (err instanceof AppError) logger.debug({ method, code: err.code, err: err.message }, 'request refused');
  else logger.error({ method, err }, 'handler failed');
}

/** The request id a call carries; undefined when it carries none (`withRequestId` ignores a malformed one). */
function requestIdOf(metadata: grpc.Metadata): string | undefined {
  const v = metadata.get(REQUEST_ID_HEADER)[0];
  return typeof v === 'string' ? v : undefined;
}

/**
 * Adapts promise handlers to grpc-js; errors become statuses, internals stay in the log. Each
 * handler runs in the request context of the call's `x-request-id`.
 */
export function implement<D extends ServiceDef>(definition: D, handlers: Handlers<D>, logger: Logger): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {};
  for (const [key, def] of Object.entries(definition)) {
    const name = methodName(def);
    const handler = (handlers as Record<string, ((...args: any[]) => Promise<any>) | undefined>)[key];
    const fail = (err: unknown) => {
      logFailure(logger, name, err);
      return toServiceError(err);
    };
    if (!handler) {
      const err = toServiceError(new UnimplementedError(`${name} is not implemented yet`));
      impl[key] = def.responseStream
        ? (call: grpc.ServerWritableStream<unknown, unknown>) => call.emit('error', err)
        : (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(err);
      continue;
    }
    // The handler and what follows it, in the request context of the call's id (a streamed request is handed over whole).
    const inContext = (call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerReadableStream<unknown, unknown>, settle: (p: Promise<unknown>) => unknown) =>
      withRequestId(requestIdOf(call.metadata), () => {
        logger.debug({ method: name }, 'call received');
        return settle(def.requestStream ? handler(call) : handler((call as grpc.ServerUnaryCall<unknown, unknown>).request, call));
      });
    impl[key] = def.responseStream
      ? (call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>) =>
          void inContext(call as never, (p) =>
            p.then(
              () => call.end(),
              (err) => call.emit('error', fail(err)),
            ),
          )
      : (call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerReadableStream<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
          void inContext(call, (p) =>
            p.then(
              (res) => callback(null, res),
              (err) => callback(fail(err)),
            ),
          );
  }
  return impl;
}

/** The health entry (grpc.health.v1 service name) through which a service reports its NATS connection (never part of '' : a NATS outage does not take a replica out of service). */
/**
 * Aborted when the caller of a call being handled gives up: it cancelled, went away, or its
 * deadline passed (grpc-js says all three as 'cancelled'). Work the answer was for can stop then.
 */
export function callSignal(call: { on(event: 'cancelled', listener: () => void): unknown; cancelled?: boolean }): AbortSignal {
  const ac = new AbortController();
  if (call.cancelled) ac.abort();
  else call.on('cancelled', () => ac.abort());
  return ac.signal;
}

export const NATS_HEALTH = 'ats.nats';

/** Serving state reported through grpc.health.v1; '' is the whole server. */
export class HealthReporter {
  readonly #status = new Map<string, ServingStatus>();
  readonly #watchers = new Set<{ service: string; call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse> }>();

  set(service: string, status: ServingStatus): void {
    this.#status.set(service, status);
    for (const w of this.#watchers) if (w.service === service) w.call.write({ status });
  }
  /** Marks every registered service (and the server) as serving or not. */
  setAll(status: ServingStatus): void {
    for (const service of [...this.#status.keys()]) this.set(service, status);
  }
  get(service: string): ServingStatus | undefined {
    return this.#status.get(service);
  }
  handlers(): grpc.UntypedServiceImplementation {
    return {
      check: (call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, cb: grpc.sendUnaryData<HealthCheckResponse>) => {
        const status = this.#status.get(call.request.service);
        if (status === undefined) return cb({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
        return cb(null, { status });
      },
      watch: (call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const w = { service: call.request.service, call };
        this.#watchers.add(w);
        call.write({ status: this.#status.get(w.service) ?? ServingStatus.SERVICE_UNKNOWN });
        call.on('cancelled', () => this.#watchers.delete(w));
        call.on('close', () => this.#watchers.delete(w));
      },
    };
  }
  /** Ends every Watch stream (on shutdown). */
  endWatches(): void {
    for (const w of this.#watchers) w.call.end();
    this.#watchers.clear();
  }
}

const unauthenticated = (): Partial<grpc.ServiceError> & { code: grpc.status; details: string } => ({
  code: grpc.status.UNAUTHENTICATED,
  details: 'Missing or invalid internal credential',
  metadata: new grpc.Metadata(),
});

/** Wraps every method of `impl` so a call without `token` is refused before its handler runs. */
function guard(definition: ServiceDef, impl: grpc.UntypedServiceImplementation, token: InternalToken): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [key, handler] of Object.entries(impl)) {
    const h = handler as (call: any, callback?: grpc.sendUnaryData<unknown>) => void;
    out[key] = definition[key]?.responseStream
      ? (call: grpc.ServerWritableStream<unknown, unknown>) => (token.accepts(call.metadata) ? h(call) : call.emit('error', unauthenticated()))
      : (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
          token.accepts(call.metadata) ? h(call, callback) : callback(unauthenticated());
  }
  return out;
}

/** The full name of the service a definition describes (e.g. `ats.run.v1.RunService`), as health reports it. */
export function serviceName(definition: ServiceDef): string {
  const first = Object.values(definition)[0];
  if (!first) throw new Error('a service definition without methods');
  return first.path.split('/')[1]!;
}

/** A registered service: its definition and its handlers (health knows it by its full name). */
export interface ServiceRegistration {
  definition: ServiceDef;
  implementation: grpc.UntypedServiceImplementation;
}

/**
 * A gRPC server with health; `listen` binds, `stop` drains then forces. Does not listen on its own.
 * Every service method requires `token`; the health service stays open, because Kubernetes'
 * gRPC probes send no metadata and it tells nothing beyond serving or not.
 */
export class GrpcServer {
  readonly server: grpc.Server;
  readonly health = new HealthReporter();
  #stopped = false;

  constructor(services: ServiceRegistration[], token: InternalToken) {
    this.server = new grpc.Server({ 'grpc.max_receive_message_length': 32 * 1024 * 1024, 'grpc.max_connection_age_ms': MAX_CONNECTION_AGE_MS });
    this.server.addService(HealthService, this.health.handlers());
    this.health.set('', ServingStatus.NOT_SERVING);
    for (const s of services) {
      this.server.addService(s.definition as unknown as grpc.ServiceDefinition, guard(s.definition, s.implementation, token));
      this.health.set(serviceName(s.definition), ServingStatus.NOT_SERVING);
    }
  }

  /** Binds and marks everything serving; resolves to the bound port. */
  async listen(host: string, port: number): Promise<number> {
    const bound = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
    });
    this.health.setAll(ServingStatus.SERVING);
    return bound;
  }

  /** Reports NOT_SERVING, lets in-flight calls finish within `timeoutMs`, then forces. Idempotent. */
  async stop(timeoutMs = 5000): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.health.setAll(ServingStatus.NOT_SERVING);
    this.health.endWatches();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, timeoutMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** Per-call options of a client. */
export interface CallOptions {
  /** Overrides the client's default deadline. */
  deadlineMs?: number;
  /** Propagated as `x-request-id` metadata; by default the request the caller serves (its context). */
  requestId?: string;
  /** More metadata for this call (e.g. a replica marking a call it forwards to another). */
  metadata?: Readonly<Record<string, string>>;
}

/** A promise client for a definition. Unary calls always carry a deadline. */
export type PromiseClient<D extends ServiceDef> = {
  [K in keyof D]: D[K]['requestStream'] extends true
    ? D[K]['responseStream'] extends true
      ? (opts?: CallOptions) => grpc.ClientDuplexStream<Req<D[K]>, Res<D[K]>>
      : (opts?: CallOptions) => { stream: grpc.ClientWritableStream<Req<D[K]>>; response: Promise<Res<D[K]>> }
    : D[K]['responseStream'] extends true
      ? (request: Req<D[K]>, opts?: CallOptions) => grpc.ClientReadableStream<Res<D[K]>>
      : (request: Req<D[K]>, opts?: CallOptions) => Promise<Res<D[K]>>;
};

/**
 * Channel options. A client spreads its calls over every address its target resolves to
 * (`round_robin`: a `dns:///` name of a headless Service, or an `ipv4:a:p,b:p` list), skipping an
 * address whose connection is down; a replica that dies closes its connections (or misses two
 * keepalive pings) and is skipped from the next call on. grpc-js has no client-side health
 * checking (gRFC A17): a connected replica counts as healthy, and one that is draining says so
 * with GOAWAY. A failed connection asks DNS again (at most every 5 s), and servers end
 * connections after `MAX_CONNECTION_AGE_MS`, so new replicas get calls without a failure first.
 * Peers that restart are reconnected quickly instead of after minutes of backoff.
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  'grpc.dns_min_time_between_resolutions_ms': 5000,
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.min_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.keepalive_time_ms': 10000,
  'grpc.keepalive_timeout_ms': 5000,
  'grpc.max_receive_message_length': 32 * 1024 * 1024,
};

/** How long a server keeps one client connection before asking it to reconnect (and re-resolve). Streams open then run on. */
export const MAX_CONNECTION_AGE_MS = 5 * 60_000;

/** A connection to one service: its promise client plus health and close. */
export interface ServiceClient<D extends ServiceDef> {
  readonly api: PromiseClient<D>;
  readonly address: string;
  /**
   * Resolves when a connection is up, or after CONNECT_WAIT_MS. Unary calls do this themselves;
   * await it before opening a stream that should ride over a peer's restart.
   */
  connected(): Promise<void>;
  /** Asks the peer's health service; resolves to its status or rejects (unreachable, timeout). */
  checkHealth(service?: string, deadlineMs?: number): Promise<ServingStatus>;
  close(): void;
}

/**
 * How long a unary call waits for a connection when none is up (a peer restarting) before it
 * fails UNAVAILABLE: as long as the longest pause between reconnect tries, so a peer that is back
 * is found.
 */
export const CONNECT_WAIT_MS = 1000;

/**
 * Resolves once the channel has a connection, or after CONNECT_WAIT_MS (or the deadline). A
 * channel whose every replica was unreachable fails calls at once until its next reconnect try;
 * waiting briefly rides over a peer's restart, while a peer that stays down still fails fast.
 */
function connected(client: grpc.Client, deadline: Date): Promise<void> {
  if (client.getChannel().getConnectivityState(true) === grpc.connectivityState.READY) return Promise.resolve();
  const until = new Date(Math.min(deadline.getTime(), Date.now() + CONNECT_WAIT_MS));
  return new Promise((resolve) => client.waitForReady(until, () => resolve()));
}

/** Metadata of one outgoing call: the internal token, and the request id given or else the current one. */
export function callMetadata(token: InternalToken, opts?: CallOptions): grpc.Metadata {
  const md = token.apply(new grpc.Metadata());
  const requestId = opts?.requestId ?? currentRequestId();
  if (requestId) md.set(REQUEST_ID_HEADER, requestId);
  for (const [k, v] of Object.entries(opts?.metadata ?? {})) md.set(k, v);
  return md;
}

/**
 * Creates a client for `definition` at `address`; every call carries `token`, every unary call
 * gets `deadlineMs` unless overridden.
 */
export function createServiceClient<D extends ServiceDef>(definition: D, address: string, deadlineMs: number, token: InternalToken): ServiceClient<D> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  const deadline = (opts?: CallOptions) => new Date(Date.now() + (opts?.deadlineMs ?? deadlineMs));
  const metadataFor = (opts?: CallOptions) => callMetadata(token, opts);
  const api: Record<string, unknown> = {};
  for (const [key, def] of Object.entries(definition)) {
    const ser = (v: unknown) => def.requestSerialize(v);
    const de = (b: Buffer) => def.responseDeserialize(b);
    if (!def.requestStream && !def.responseStream) {
      api[key] = async (request: unknown, opts?: CallOptions) => {
        const end = deadline(opts);
        await connected(client, end);
        return new Promise((resolve, reject) => {
          client.makeUnaryRequest(def.path, ser, de, request, metadataFor(opts), { deadline: end }, (err, res) =>
            err ? reject(fromServiceError(err)) : resolve(res),
          );
        });
      };
    } else if (!def.requestStream && def.responseStream) {
      api[key] = (request: unknown, opts?: CallOptions) =>
        client.makeServerStreamRequest(def.path, ser, de, request, metadataFor(opts), opts?.deadlineMs ? { deadline: deadline(opts) } : {});
    } else if (def.requestStream && !def.responseStream) {
      api[key] = (opts?: CallOptions) => {
        let stream!: grpc.ClientWritableStream<unknown>;
        const response = new Promise((resolve, reject) => {
          stream = client.makeClientStreamRequest(def.path, ser, de, metadataFor(opts), { deadline: deadline(opts) }, (err, res) =>
            err ? reject(fromServiceError(err)) : resolve(res),
          );
        });
        return { stream, response };
      };
    } else {
      api[key] = (opts?: CallOptions) => client.makeBidiStreamRequest(def.path, ser, de, metadataFor(opts), {});
    }
  }
  const healthDef = HealthService.check;
  return {
    api: api as PromiseClient<D>,
    address,
    connected: () => connected(client, new Date(Date.now() + CONNECT_WAIT_MS)),
    checkHealth(service = '', healthDeadlineMs = 1000) {
      return new Promise((resolve, reject) => {
        client.makeUnaryRequest(
          healthDef.path,
          (v: HealthCheckRequest) => healthDef.requestSerialize(v),
          (b: Buffer) => healthDef.responseDeserialize(b),
          { service },
          metadataFor(),
          { deadline: new Date(Date.now() + healthDeadlineMs) },
          (err, res) => (err ? reject(fromServiceError(err)) : resolve(res!.status)),
        );
      });
    },
    close: () => client.close(),
  };
}
