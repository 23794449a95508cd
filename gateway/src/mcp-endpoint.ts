/**
 * `/mcp`: the MCP server (the TypeScript package's, `@agent-task-service/client/mcp`) over
 * Streamable HTTP, with the same API key as the REST API — in `X-Service-API-Key` or, as MCP
 * clients commonly send it, `Authorization: Bearer <key>`. Its tools call this gateway's public
 * API on the address the request came in on, with the caller's key: the MCP server stays a thin
 * client of the public API, and a key reaches exactly what it reaches over REST.
 *
 * Stateless (a new server per request): no session to keep, so any replica answers any request.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import type { ApiKeyAuthenticator } from './auth.js';
import { API_KEY_HEADER } from './auth.js';

export interface McpEndpointDeps {
  auth: ApiKeyAuthenticator;
  bodyLimitBytes: number;
  /** The gateway's own base URL as its tools reach it; default: the local address of the request's connection. */
  selfUrl?: (req: Request) => string;
}

/** The key of an MCP request: the API's header, or a bearer token. */
export function mcpKey(req: Request): string | undefined {
  const key = req.get(API_KEY_HEADER);
  if (key) return key;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
  return m?.[1];
}

/** http://<the address this connection reached>:<port>: this very gateway, whatever HOST it listens on. */
export function localUrl(req: Request): string {
  let host = req.socket.localAddress ?? '127.0.0.1';
  if (host.startsWith('::ffff:')) host = host.slice(7);
  if (host.includes(':')) host = `[${host}]`;
  return `http://${host}:${req.socket.localPort}`;
}

type McpModule = typeof import('@agent-task-service/client/mcp');
let mcpModule: Promise<McpModule> | undefined;

// Loaded on the first request: a gateway that never serves /mcp never loads the MCP SDK.
function loadMcp(): Promise<McpModule> {
  mcpModule ??= import('@agent-task-service/client/mcp').catch((err: unknown) => {
    mcpModule = undefined;
    throw err;
  });
  return mcpModule;
}

/** The `/mcp` route. */
export function mcpEndpoint(deps: McpEndpointDeps): express.Router {
  const router = express.Router();
  const json = express.json({ limit: deps.bodyLimitBytes });
  router.all('/mcp', async (req: Request, res: Response, next: NextFunction) => {
    const key = mcpKey(req);
    const grant = key ? await deps.auth.authenticate(key) : undefined;
    if (!key || !grant) {
      res.set('WWW-Authenticate', 'Bearer realm="agent-task-service"').status(401).json({ detail: 'Invalid or missing API key' });
      return;
    }
    // A stateless server has no stream to open (GET) and no session to end (DELETE).
    if (req.method !== 'POST') {
      res.set('Allow', 'POST').status(405).json({ detail: 'Method Not Allowed' });
      return;
    }
    json(req, res, async (err?: unknown) => {
      if (err) return next(err);
      try {
        const { handleMcpHttpRequest } = await loadMcp();
        await handleMcpHttpRequest(req, res, req.body, { apiKey: key, baseUrl: (deps.selfUrl ?? localUrl)(req) });
      } catch (e) {
        next(e);
      }
    });
  });
  return router;
}
