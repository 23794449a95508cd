/**
 * The MCP server of the Agent Task Service: tools that let an assistant (Claude Desktop, Cursor,
 * an agent framework) hand a browser task to the service, watch it, stop it, take a browser of
 * its own and fetch the files a run wrote. Every tool calls the public API through the SDK, with
 * the key of whoever runs the server (stdio) or calls it (the gateway's `/mcp`).
 *
 * Tool inputs are snake_case like the API's request bodies, and so are the tools' structured
 * outputs, so an id one tool returns is passed on to the next under the same name. An API error
 * comes back as a tool error (`isError: true`) carrying the API's detail and request id.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { z } from 'zod';
import { AgentTaskService, APIError } from './index.js';
import type { Browser, File, Profile, Run, Step } from './index.js';

/** The package's version, reported to MCP clients. */
export const MCP_SERVER_VERSION = '0.1.0';

/** How long `run_task` waits by default (seconds); below the 60 s an MCP client commonly allows a call. */
export const DEFAULT_WAIT_SECONDS = 45;
/** The longest `run_task` waits (seconds); a longer run is polled with `get_run`. */
export const MAX_WAIT_SECONDS = 600;

const AGENTS = ['browser-agent', 'browsercode'] as const;
const TERMINAL = new Set(['completed', 'failed', 'stopped']);

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

// ---------- schemas ----------

const agent = z.enum(AGENTS).optional().describe('The agent: browser-agent (default; a browser) or browsercode (code, files, a terminal and a browser)');
const runId = z.string().min(1).describe('The run id (run_…), as run_task returned it');

const runOut = {
  run_id: z.string(),
  agent: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'stopped', 'failed']),
  task: z.string(),
  model: z.string(),
  result: z.string().nullable().describe("The agent's answer (on failure, the best partial answer, if any)"),
  error: z.string().nullable().describe('Why the run failed; null otherwise'),
  session_id: z.string().describe('Pass as session_id to run_task for a follow-up in the same session'),
  browser_id: z.string().nullable(),
  workspace_id: z.string().nullable(),
  total_cost_usd: z.string(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
};

const stepOut = z.object({
  number: z.number().int(),
  action: z.string(),
  url: z.string().nullable(),
  thought: z.string().nullable(),
  screenshot_url: z.string().nullable(),
  ts: z.string(),
  duration_ms: z.number().int(),
});

const browserOut = {
  browser_id: z.string(),
  status: z.enum(['active', 'stopped']),
  cdp_url: z.string().nullable().describe('Chrome DevTools Protocol WebSocket URL (puppeteer.connect browserWSEndpoint, Playwright connectOverCDP)'),
  live_view_url: z.string().nullable().describe('A page that shows the browser live; a person can use it too'),
  profile_id: z.string().nullable(),
  screen_width: z.number().int(),
  screen_height: z.number().int(),
  created_at: z.string(),
  timeout_at: z.string().nullable(),
  stopped_at: z.string().nullable(),
};

const fileOut = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.enum(['input', 'output']),
  download_url: z.string().describe('Presigned GET URL (no key needed; expires, list again for a fresh one)'),
  size_bytes: z.number().int(),
  content_type: z.string(),
  created_at: z.string(),
});

const profileOut = z.object({
  id: z.string(),
  name: z.string(),
  user_id: z.string().nullable(),
  last_used_at: z.string().nullable(),
  cookie_domains: z.array(z.string()),
  created_at: z.string(),
});

// ---------- API objects → tool outputs ----------

function runView(r: Run) {
  return {
    run_id: r.id,
    agent: r.agent,
    status: r.status,
    task: r.task,
    model: r.model,
    result: r.result,
    error: r.error,
    session_id: r.sessionId,
    browser_id: r.browserId,
    workspace_id: r.workspaceId,
    total_cost_usd: r.totalCostUsd,
    created_at: r.createdAt,
    finished_at: r.finishedAt,
  };
}

const stepView = (s: Step) => ({
  number: s.number,
  action: s.action,
  url: s.url,
  thought: s.thought,
  screenshot_url: s.screenshotUrl,
  ts: s.ts,
  duration_ms: s.durationMs,
});

const browserView = (b: Browser) => ({
  browser_id: b.id,
  status: b.status,
  cdp_url: b.cdpUrl,
  live_view_url: b.liveViewUrl,
  profile_id: b.profileId,
  screen_width: b.screenWidth,
  screen_height: b.screenHeight,
  created_at: b.createdAt,
  timeout_at: b.timeoutAt,
  stopped_at: b.stoppedAt,
});

const fileView = (f: File) => ({
  id: f.id,
  name: f.name,
  kind: f.kind,
  download_url: f.downloadUrl,
  size_bytes: f.sizeBytes,
  content_type: f.contentType,
  created_at: f.createdAt,
});

const profileView = (p: Profile) => ({
  id: p.id,
  name: p.name,
  user_id: p.userId,
  last_used_at: p.lastUsedAt,
  cookie_domains: p.cookieDomains,
  created_at: p.createdAt,
});

// ---------- results ----------

/** A tool's answer: the structured output, and the same as JSON text for clients that read only text. */
function ok<T extends Record<string, unknown>>(structured: T, summary?: string): CallToolResult {
  const json = JSON.stringify(structured, null, 2);
  return { structuredContent: structured, content: [{ type: 'text', text: summary ? `${summary}\n\n${json}` : json }] };
}

/** What the API (or the network) said, as a tool error; never the key (the SDK's messages hold none). */
export function toolError(err: unknown): CallToolResult {
  let text: string;
  // A 422's detail lists each invalid field (`body.task: Field required`).
  if (err instanceof APIError && err.status !== undefined) {
    text = `${err.detail ?? 'Error'} (HTTP ${err.status}${err.requestId ? `, request id ${err.requestId}` : ''})`;
  } else {
    text = err instanceof Error ? err.message : String(err);
  }
  return { isError: true, content: [{ type: 'text', text }] };
}

/** Runs a tool's body; whatever it throws becomes a tool error, so the server never goes down with it. */
function guarded<A>(fn: (args: A, extra: Extra) => Promise<CallToolResult>) {
  return async (args: A, extra: Extra): Promise<CallToolResult> => {
    try {
      return await fn(args, extra);
    } catch (err) {
      return toolError(err);
    }
  };
}

// ---------- the server ----------

export interface McpServerOptions {
  /** Upper bound of `run_task`'s wait in seconds (default MAX_WAIT_SECONDS). */
  maxWaitSeconds?: number;
}

/** An MCP server whose tools call the Agent Task Service through `client`; connect it to a transport. */
export function createMcpServer(client: AgentTaskService, options: McpServerOptions = {}): McpServer {
  const maxWait = options.maxWaitSeconds ?? MAX_WAIT_SECONDS;
  const server = new McpServer(
    { name: 'agent-task-service', title: 'Agent Task Service', version: MCP_SERVER_VERSION },
    {
      instructions:
        'Runs tasks in plain language in a real browser (agent browser-agent) or with code, files and a terminal (browsercode). ' +
        'run_task starts a run and waits for its answer up to wait_seconds; when it is not done yet, poll get_run with its run_id. ' +
        'Pass a run’s session_id to run_task for a follow-up in the same browser session.',
    },
  );

  server.registerTool(
    'run_task',
    {
      title: 'Run a task',
      description:
        'Starts a run of a task in plain language and waits for it to end, up to wait_seconds. Returns the answer (result) when it ended; ' +
        'otherwise done=false with the run_id and status to poll with get_run (or stop with stop_run).',
      inputSchema: {
        task: z.string().min(1).max(50_000).describe('What to do, in plain language (e.g. "Open https://example.com and read the heading")'),
        agent,
        model: z.string().min(1).optional().describe('The model to run it with (the service default when omitted)'),
        session_id: z.string().min(1).optional().describe('A session_id from an earlier run: a follow-up in the same session'),
        profile_id: z.string().min(1).optional().describe('A browser profile (list_profiles) whose logins the browser starts with'),
        proxy_country_code: z.string().length(2).optional().describe('Browse through a proxy of this country (ISO 3166-1 alpha-2, lower case)'),
        workspace_id: z.string().min(1).optional().describe('browsercode only: the workspace whose disk the run uses'),
        wait_seconds: z.number().int().min(0).max(maxWait).optional().describe(`How long to wait for the run to end (default ${DEFAULT_WAIT_SECONDS}, at most ${maxWait}); 0 returns at once`),
      },
      outputSchema: {
        done: z.boolean().describe('True when the run ended (completed, failed or stopped)'),
        ...runOut,
        steps: z.number().int().describe('Browser steps taken so far'),
        live_view_url: z.string().nullable().describe("A page showing the run's browser live (null until it has one)"),
        next: z.string().nullable().describe('What to do next when the run has not ended'),
      },
      annotations: { title: 'Run a task', readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    guarded(async (args, extra) => {
      const browser = {
        ...(args.profile_id ? { profileId: args.profile_id } : {}),
        ...(args.proxy_country_code ? { proxyCountryCode: args.proxy_country_code } : {}),
      };
      const created = await client.runs.create({
        task: args.task,
        ...(args.agent ? { agent: args.agent } : {}),
        ...(args.model ? { model: args.model } : {}),
        ...(args.session_id ? { sessionId: args.session_id } : {}),
        ...(args.workspace_id ? { workspaceId: args.workspace_id } : {}),
        ...(Object.keys(browser).length ? { browser } : {}),
      });
      const opts = { agent: created.agent };
      const progressToken = extra._meta?.progressToken;
      // Follow the run's events until it ends, the wait is over or the client cancels.
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(new Error('wait over')), (args.wait_seconds ?? DEFAULT_WAIT_SECONDS) * 1000);
      const cancel = () => stop.abort(extra.signal.reason);
      extra.signal.addEventListener('abort', cancel, { once: true });
      let steps = 0;
      let liveViewUrl: string | null = null;
      try {
        for await (const ev of client.runs.stream(created.id, { ...opts, signal: stop.signal })) {
          const data = ev.data as { number?: unknown; action?: unknown; liveViewUrl?: unknown };
          if (ev.type === 'browser.ready' && typeof data.liveViewUrl === 'string') liveViewUrl = data.liveViewUrl;
          if (ev.type === 'step' && typeof data.number === 'number') {
            steps = data.number;
            // The client sees the run move; one that resets its timeout on progress waits as long as steps come.
            if (progressToken !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: steps, message: `step ${steps}: ${String(data.action)}` } });
          }
        }
      } catch (err) {
        if (!stop.signal.aborted) throw err;
      } finally {
        clearTimeout(timer);
        extra.signal.removeEventListener('abort', cancel);
      }
      const run = await client.runs.get(created.id, opts);
      const done = TERMINAL.has(run.status);
      const out = {
        done,
        ...runView(run),
        steps,
        live_view_url: liveViewUrl,
        next: done ? null : `The run is ${run.status}. Call get_run with run_id "${run.id}"${run.agent === 'browser-agent' ? '' : ` and agent "${run.agent}"`} until its status is completed, failed or stopped.`,
      };
      const said = run.status === 'failed' ? run.error : run.result;
      const summary = done ? `Run ${run.id} ${run.status}${said ? `: ${said}` : ''}` : out.next!;
      return ok(out, summary);
    }),
  );

  server.registerTool(
    'get_run',
    {
      title: 'Get a run',
      description: "A run's status, its answer (result) when completed, and why it failed (error).",
      inputSchema: { run_id: runId, agent },
      outputSchema: runOut,
      annotations: { title: 'Get a run', readOnlyHint: true, openWorldHint: false },
    },
    guarded(async (args) => ok(runView(await client.runs.get(args.run_id, { agent: args.agent ?? 'browser-agent' })))),
  );

  server.registerTool(
    'list_steps',
    {
      title: "List a run's steps",
      description: 'The browser actions a run took, in order, each with the page URL and a screenshot link. Page on with after=next_after.',
      inputSchema: {
        run_id: runId,
        agent,
        after: z.number().int().min(0).optional().describe('Only steps after this number (next_after of the previous call)'),
        limit: z.number().int().min(1).max(200).optional().describe('At most this many steps (default 50)'),
      },
      outputSchema: {
        steps: z.array(stepOut),
        has_more: z.boolean(),
        next_after: z.number().int().describe('Pass as after to read the steps that follow'),
      },
      annotations: { title: "List a run's steps", readOnlyHint: true, openWorldHint: false },
    },
    guarded(async (args) => {
      const limit = args.limit ?? 50;
      const steps: Step[] = [];
      let hasMore = false;
      for await (const s of client.runs.steps(args.run_id, { agent: args.agent ?? 'browser-agent', ...(args.after !== undefined ? { after: args.after } : {}) })) {
        if (steps.length === limit) {
          hasMore = true;
          break;
        }
        steps.push(s);
      }
      return ok({ steps: steps.map(stepView), has_more: hasMore, next_after: steps.at(-1)?.number ?? args.after ?? 0 });
    }),
  );

  server.registerTool(
    'stop_run',
    {
      title: 'Stop a run',
      description: 'Stops a queued or running run (its browser session closes for browser-agent). A run that already ended is an error naming its status.',
      inputSchema: { run_id: runId, agent },
      outputSchema: runOut,
      annotations: { title: 'Stop a run', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    guarded(async (args) => ok(runView(await client.runs.stop(args.run_id, { agent: args.agent ?? 'browser-agent' })))),
  );

  server.registerTool(
    'create_browser',
    {
      title: 'Create a browser',
      description:
        'Starts a standalone Chromium for you to drive over the Chrome DevTools Protocol (cdp_url), with a live view page (live_view_url). ' +
        'It runs until stop_browser or its timeout.',
      inputSchema: {
        profile_id: z.string().min(1).optional().describe('Start with this profile’s cookies and storage (saved again when the browser stops)'),
        proxy_country_code: z.string().length(2).optional().describe('Browse through a proxy of this country (ISO 3166-1 alpha-2, lower case)'),
        screen_width: z.number().int().min(320).max(3840).optional().describe('Screen width in pixels (with screen_height)'),
        screen_height: z.number().int().min(240).max(2160).optional().describe('Screen height in pixels (with screen_width)'),
        timeout_minutes: z.number().int().min(1).max(240).optional().describe('Stop it after this many minutes (default 60)'),
      },
      outputSchema: browserOut,
      annotations: { title: 'Create a browser', readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    guarded(async (args) => {
      const b = await client.browsers.create({
        ...(args.profile_id ? { profileId: args.profile_id } : {}),
        ...(args.proxy_country_code ? { proxyCountryCode: args.proxy_country_code } : {}),
        ...(args.screen_width !== undefined ? { screenWidth: args.screen_width } : {}),
        ...(args.screen_height !== undefined ? { screenHeight: args.screen_height } : {}),
        ...(args.timeout_minutes !== undefined ? { timeoutMinutes: args.timeout_minutes } : {}),
      });
      return ok(browserView(b));
    }),
  );

  server.registerTool(
    'stop_browser',
    {
      title: 'Stop a browser',
      description: 'Stops a browser (its profile, if any, is saved; its recording is finished). Stopping a stopped browser is fine.',
      inputSchema: { browser_id: z.string().min(1).describe('The browser id (brw_…)') },
      outputSchema: browserOut,
      annotations: { title: 'Stop a browser', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    guarded(async (args) => ok(browserView(await client.browsers.stop(args.browser_id)))),
  );

  server.registerTool(
    'list_run_files',
    {
      title: "List a run's files",
      description: "The files of a run: the ones attached to it (input) and the ones the agent wrote (output), each with a download URL that needs no key.",
      inputSchema: { run_id: runId, agent, kind: z.enum(['input', 'output']).optional().describe('Only input or only output files (default both)') },
      outputSchema: { files: z.array(fileOut) },
      annotations: { title: "List a run's files", readOnlyHint: true, openWorldHint: false },
    },
    guarded(async (args) => {
      const files = await client.runs.files(args.run_id, { agent: args.agent ?? 'browser-agent', ...(args.kind ? { kind: args.kind } : {}) });
      return ok({ files: files.map(fileView) });
    }),
  );

  server.registerTool(
    'list_profiles',
    {
      title: 'List browser profiles',
      description: 'The browser profiles of this project (saved cookies and storage; pass an id as profile_id to run_task or create_browser).',
      inputSchema: {},
      outputSchema: { profiles: z.array(profileOut) },
      annotations: { title: 'List browser profiles', readOnlyHint: true, openWorldHint: false },
    },
    guarded(async () => {
      const profiles: Profile[] = [];
      for await (const p of client.profiles.list()) profiles.push(p);
      return ok({ profiles: profiles.map(profileView) });
    }),
  );

  return server;
}

/** Serves the MCP server over stdio (what `ats mcp` runs) until stdin ends. */
export async function serveStdio(client: AgentTaskService, options: McpServerOptions = {}): Promise<void> {
  const server = createMcpServer(client, options);
  const ended = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await server.connect(new StdioServerTransport());
  await ended;
  await server.close();
}

export interface McpHttpOptions extends McpServerOptions {
  /** The caller's API key: the tools act as the caller. */
  apiKey: string;
  /** Where the tools reach the public API (the gateway's own address). */
  baseUrl: string;
}

/**
 * Answers one Streamable HTTP request (stateless: a new server and transport per request, so any
 * gateway replica can answer any request). `body` is the parsed JSON body.
 */
export async function handleMcpHttpRequest(req: IncomingMessage, res: ServerResponse, body: unknown, options: McpHttpOptions): Promise<void> {
  const { apiKey, baseUrl, ...serverOptions } = options;
  const server = createMcpServer(new AgentTaskService({ apiKey, baseUrl }), serverOptions);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}
