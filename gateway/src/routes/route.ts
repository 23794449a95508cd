/**
 * A route is declared once: the router registers it, the OpenAPI document describes it, and
 * its handler's body, query, params and reply types are read off the same schemas.
 */
import type { Request, Response } from 'express';
import type { ApiKeyRepository } from '../api-key.repository.js';
import type { Clients } from '../clients.js';
import type { FromSchema, JsonSchema } from '../json-schema.js';
import type { pathParams } from '../schemas.js';

/** What a handler is given; `P`, `B` and `Q` are the types of its path parameters, body and query. */
export interface RouteContext<P = {}, B = unknown, Q = unknown> {
  projectId: string;
  requestId: string;
  params: P;
  body: B;
  query: Q;
  clients: Clients;
  /** The gateway's own keys (the /api-keys routes). */
  keys: ApiKeyRepository;
  req: Request;
  res: Response;
}

type ParamType<K extends string> = K extends keyof typeof pathParams ? FromSchema<(typeof pathParams)[K]> : string;

/** The path parameters of an Express path: `/agents/:agent/runs/:runId` → `{ agent: AgentName; runId: string }`. */
export type PathParams<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? { [K in Name]: ParamType<K> } & PathParams<Rest>
  : Path extends `${string}:${infer Name}`
    ? { [K in Name]: ParamType<K> }
    : {};

type Value<S, Absent> = S extends JsonSchema ? FromSchema<S> : Absent;

/** A route as written: the handler's types follow from `path`, `body`, `query` and `success.schema`. */
export interface RouteSpec<Path extends string, B extends JsonSchema | undefined, Q extends JsonSchema | undefined, R extends JsonSchema | undefined> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Express path under /api/v1, e.g. `/agents/:agent/runs/:runId`. */
  path: Path;
  operationId: string;
  summary: string;
  tag: string;
  body?: B;
  query?: Q;
  /** The success status and the schema of its body (none for 204 or streams). */
  success: { status: number; schema?: R; description?: string; contentType?: string };
  /** Error statuses this route answers beyond those every route can (see openapi.ts). */
  errors?: number[];
  /** Returns the JSON body; a stream route writes the response itself and returns undefined. */
  handler(ctx: RouteContext<PathParams<Path>, Value<B, undefined>, Value<Q, {}>>): Promise<Value<R, undefined>>;
}

/** A route in the table, its types erased (the router and the document need only the schemas). */
export interface RouteDef {
  method: 'get' | 'post' | 'patch' | 'delete';
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  body?: JsonSchema;
  query?: JsonSchema;
  success: { status: number; schema?: JsonSchema; description?: string; contentType?: string };
  errors?: number[];
  handler(ctx: RouteContext<Record<string, string>, unknown, unknown>): Promise<unknown>;
}

/** Declares a route; its handler is type-checked against its schemas. */
export function route<Path extends string, B extends JsonSchema | undefined = undefined, Q extends JsonSchema | undefined = undefined, R extends JsonSchema | undefined = undefined>(
  spec: RouteSpec<Path, B, Q, R>,
): RouteDef {
  // Sound at run time: the app validates body and query with these schemas, and the agent parameter against its enum, before the handler runs.
  return spec as unknown as RouteDef;
}
