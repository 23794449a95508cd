import { FileKind } from '../../../gen/ats/filestorage/v1/file_storage.js';
import * as s from '../schemas.js';
import { agentEnum } from '../../../services/common/src/agent-name.js';
import { page, presentFile, presentUploadItem, presentWorkspace, required } from '../presenters.js';
import { HttpError } from '../http-errors.js';
import { route, type RouteContext, type RouteDef } from './route.js';

const opts = (ctx: RouteContext) => ({ requestId: ctx.requestId });
const KIND: Record<'input' | 'output', FileKind> = { input: FileKind.FILE_KIND_INPUT, output: FileKind.FILE_KIND_OUTPUT };
const wsRef = (ctx: RouteContext<{ workspaceId: string }>) => ({ projectId: ctx.projectId, workspaceId: ctx.params.workspaceId });

export function fileRoutes(): RouteDef[] {
  return [
    route({
      method: 'post',
      path: '/agents/:agent/files',
      operationId: 'addFiles',
      summary: 'Add files: returns a presigned upload_url per file for a PUT of its bytes',
      tag: 'files',
      body: s.addFilesBody,
      success: { status: 201, schema: s.uploadItems },
      handler: async (ctx) => {
        const res = await ctx.clients.fileStorage.api.createUploads(
          { projectId: ctx.projectId, agent: agentEnum(ctx.params.agent), files: ctx.body.files },
          opts(ctx),
        );
        return { items: res.items.map(presentUploadItem) };
      },
    }),
    route({
      method: 'get',
      path: '/agents/:agent/runs/:runId/files',
      operationId: 'listRunFiles',
      summary: "A run's input (attached) and output (agent-written) files with fresh download links, a page at a time (inputs first, then by name)",
      tag: 'files',
      query: s.filesQuery,
      success: { status: 200, schema: s.fileList },
      errors: [404],
      handler: async (ctx) => {
        const { kind, limit, cursor } = ctx.query;
        const agent = agentEnum(ctx.params.agent);
        // An unknown run (or another project's, or another agent's) is 404, not an empty list.
        required((await ctx.clients.run.api.getRun({ projectId: ctx.projectId, agent, runId: ctx.params.runId }, opts(ctx))).run, 'run');
        const res = await ctx.clients.fileStorage.api.listRunFiles(
          { projectId: ctx.projectId, agent, runId: ctx.params.runId, kind: kind ? KIND[kind] : FileKind.FILE_KIND_UNSPECIFIED, limit: limit ?? 50, cursor: cursor ?? '' },
          opts(ctx),
        );
        return page(res, presentFile);
      },
    }),
    route({
      method: 'post',
      path: '/agent-workspaces',
      operationId: 'createWorkspace',
      summary: 'Create a workspace: a named disk shared across conversations (browsercode)',
      tag: 'workspaces',
      body: s.createWorkspaceBody,
      success: { status: 201, schema: s.workspace },
      handler: async (ctx) =>
        presentWorkspace(required((await ctx.clients.fileStorage.api.createWorkspace({ projectId: ctx.projectId, name: ctx.body.name }, opts(ctx))).workspace, 'workspace')),
    }),
    route({
      method: 'get',
      path: '/agent-workspaces',
      operationId: 'listWorkspaces',
      summary: "List the project's workspaces",
      tag: 'workspaces',
      query: s.pageQuery,
      success: { status: 200, schema: s.workspaceList },
      handler: async (ctx) => {
        const q = ctx.query;
        return page(await ctx.clients.fileStorage.api.listWorkspaces({ projectId: ctx.projectId, limit: q.limit ?? 50, cursor: q.cursor ?? '' }, opts(ctx)), presentWorkspace);
      },
    }),
    route({
      method: 'get',
      path: '/agent-workspaces/:workspaceId',
      operationId: 'getWorkspace',
      summary: 'Read a workspace',
      tag: 'workspaces',
      success: { status: 200, schema: s.workspace },
      errors: [404],
      handler: async (ctx) => presentWorkspace(required((await ctx.clients.fileStorage.api.getWorkspace(wsRef(ctx), opts(ctx))).workspace, 'workspace')),
    }),
    route({
      method: 'patch',
      path: '/agent-workspaces/:workspaceId',
      operationId: 'updateWorkspace',
      summary: 'Rename a workspace',
      tag: 'workspaces',
      body: s.updateWorkspaceBody,
      success: { status: 200, schema: s.workspace },
      errors: [404],
      handler: async (ctx) =>
        presentWorkspace(required((await ctx.clients.fileStorage.api.updateWorkspace({ ...wsRef(ctx), name: ctx.body.name }, opts(ctx))).workspace, 'workspace')),
    }),
    route({
      method: 'delete',
      path: '/agent-workspaces/:workspaceId',
      operationId: 'deleteWorkspace',
      summary: 'Delete a workspace and its disk',
      tag: 'workspaces',
      success: { status: 204 },
      errors: [404],
      handler: async (ctx) => {
        const res = await ctx.clients.fileStorage.api.deleteWorkspace(wsRef(ctx), opts(ctx));
        if (!res.deleted) throw new HttpError(404, 'Workspace not found');
        return undefined;
      },
    }),
    route({
      method: 'post',
      path: '/agent-workspaces/:workspaceId/files',
      operationId: 'addWorkspaceFiles',
      summary: "Add files to a workspace's disk (presigned add flow)",
      tag: 'workspaces',
      body: s.addFilesBody,
      success: { status: 201, schema: s.uploadItems },
      errors: [404],
      handler: async (ctx) => {
        const res = await ctx.clients.fileStorage.api.createWorkspaceUploads({ ...wsRef(ctx), files: ctx.body.files }, opts(ctx));
        return { items: res.items.map(presentUploadItem) };
      },
    }),
    route({
      method: 'get',
      path: '/agent-workspaces/:workspaceId/files',
      operationId: 'listWorkspaceFiles',
      summary: "A workspace's files with fresh download links",
      tag: 'workspaces',
      query: s.pageQuery,
      success: { status: 200, schema: s.workspaceFileList },
      errors: [404],
      handler: async (ctx) => {
        const q = ctx.query;
        return page(await ctx.clients.fileStorage.api.listWorkspaceFiles({ ...wsRef(ctx), limit: q.limit ?? 50, cursor: q.cursor ?? '' }, opts(ctx)), presentFile);
      },
    }),
  ];
}
