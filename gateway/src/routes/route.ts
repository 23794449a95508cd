/** A route is declared once: the router registers it and the OpenAPI document describes it. */
import type { Request, Response } from 'express';
import type { Clients } from '../clients.js';
import type { JsonSchema } from '../schemas.js';

export interface RouteContext<B = any, Q = any> {
  projectId: string;
  requestId: string;
  params: Record<string, string>;
  body: B;
  query: Q;
  clients: Clients;
  req: Request;
  res: Response;
}

export interface RouteDef {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Express path under /api/v1, e.g. `/agents/:agent/runs/:runId`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  body?: JsonSchema;
  query?: JsonSchema;
  /** The success status and the schema of its body (none for 204 or streams). */
  success: { status: number; schema?: JsonSchema; description?: string; contentType?: string };
  /** Error statuses worth documenting beyond 401/422/500/503. */
  errors?: number[];
  /** Returns the JSON body; a stream route writes the response itself and returns undefined. */
  handler(ctx: RouteContext): Promise<unknown>;
}

/** Identity helper that keeps route literals typed. */
export function route(def: RouteDef): RouteDef {
  return def;
}
