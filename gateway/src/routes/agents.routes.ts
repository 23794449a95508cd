import { agentsResponse, modelList, type AgentInfoReply } from '../schemas.js';
import { presentAgent, presentModels } from '../presenters.js';
import { route, type RouteContext, type RouteDef } from './route.js';

/** Where the registry comes from: the run service over gRPC, or (benchmark baseline) a local list. */
export type AgentSource = (ctx: RouteContext) => Promise<AgentInfoReply[]>;

export const agentsFromRunService: AgentSource = async (ctx) =>
  (await ctx.clients.run.api.listAgents({}, { requestId: ctx.requestId })).agents.map(presentAgent);

export function agentRoutes(source: AgentSource = agentsFromRunService): RouteDef[] {
  return [
    route({
      method: 'get',
      path: '/agents',
      operationId: 'listAgents',
      summary: 'List the agents and the watch verb (steps or events) each uses',
      tag: 'agents',
      success: { status: 200, schema: agentsResponse },
      handler: async (ctx) => ({ agents: await source(ctx) }),
    }),
    route({
      method: 'get',
      path: '/models',
      operationId: 'listModels',
      summary: 'List the models a run may name (`model`), and the one a run that names none uses',
      tag: 'agents',
      success: { status: 200, schema: modelList },
      handler: async (ctx) => presentModels(await ctx.clients.run.api.listModels({}, { requestId: ctx.requestId })),
    }),
  ];
}
