import type { ApiKeyInfo } from '../api-key.repository.js';
import { HttpError } from '../http-errors.js';
import * as s from '../schemas.js';
import { route, type RouteDef } from './route.js';

function presentApiKey(k: ApiKeyInfo): s.ApiKeyReply {
  return { id: k.id, name: k.name, prefix: k.prefix, scope: k.scope, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt };
}

/** The project's API keys, managed with a key of the project (`npm run keys` does the same from a shell). */
export function apiKeyRoutes(): RouteDef[] {
  return [
    route({
      method: 'post',
      path: '/api-keys',
      operationId: 'createApiKey',
      summary: 'Issue an API key for this project; the key is in this reply only',
      tag: 'api-keys',
      body: s.createApiKeyBody,
      success: { status: 201, schema: s.apiKeyCreated },
      handler: async (ctx) => {
        const { key, info } = await ctx.keys.createInProject(ctx.projectId, ctx.body.name, ctx.body.scope ?? 'full');
        return { ...presentApiKey(info), key };
      },
    }),
    route({
      method: 'get',
      path: '/api-keys',
      operationId: 'listApiKeys',
      summary: "The project's keys that are not revoked (never the keys themselves)",
      tag: 'api-keys',
      success: { status: 200, schema: s.apiKeyList },
      handler: async (ctx) => ({ items: (await ctx.keys.listActive(ctx.projectId)).map(presentApiKey) }),
    }),
    route({
      method: 'delete',
      path: '/api-keys/:apiKeyId',
      operationId: 'revokeApiKey',
      summary: 'Revoke a key: it fails from the next request on, on every gateway',
      tag: 'api-keys',
      success: { status: 204 },
      errors: [404],
      handler: async (ctx) => {
        if (!(await ctx.keys.revokeInProject(ctx.projectId, ctx.params.apiKeyId))) throw new HttpError(404, 'API key not found');
        return undefined;
      },
    }),
  ];
}
