/**
 * The MCP server as an assistant reaches it: the MCP SDK's own Client over stdio (spawning
 * `ats mcp`, the built binary, with a user's environment) and over Streamable HTTP (the gateway's
 * `/mcp` with the API key), against one real stack. Each transport lists the tools and calls every
 * one; the client checks each structured output against the tool's output schema.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { buildClientPackage, CLIENT_DIR } from './support/client-build.js';
import { startClientHarness, type ClientHarness } from './support/client-harness.js';

const PKG = CLIENT_DIR;
const TOOLS = ['create_browser', 'get_run', 'list_profiles', 'list_run_files', 'list_steps', 'run_task', 'stop_browser', 'stop_run'];

let h: ClientHarness;
let site: string;
let direct: string;

before(async () => {
  // `ats mcp` runs the built package: build it while the stack starts.
  [h] = await Promise.all([startClientHarness(), buildClientPackage()]);
  site = h.env.ATS_TEST_SITE!;
  direct = h.env.ATS_TEST_DIRECT_URL!;
});
after(async () => {
  await h?.stop();
});

interface Call extends CallToolResult {
  structuredContent?: Record<string, unknown>;
}

const text = (r: Call) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const call = async (client: Client, name: string, args: Record<string, unknown> = {}, options: Parameters<Client['callTool']>[2] = {}) =>
  (await client.callTool({ name, arguments: args }, undefined, options)) as Call;

/** The structured output of a call that must have succeeded. */
async function ok<T>(client: Client, name: string, args: Record<string, unknown> = {}, options: Parameters<Client['callTool']>[2] = {}): Promise<T> {
  const r = await call(client, name, args, options);
  assert.ok(!r.isError, `${name} failed: ${text(r)}`);
  assert.ok(r.structuredContent, `${name} has structured content`);
  return r.structuredContent as T;
}

interface RunOut {
  done: boolean;
  run_id: string;
  agent: string;
  status: string;
  result: string | null;
  error: string | null;
  session_id: string;
  steps: number;
  next: string | null;
  live_view_url: string | null;
}

/** Every tool through `client`, as an assistant would chain them. */
async function everyTool(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.outputSchema?.type, 'object', `${t.name} declares its output`);
    assert.ok(t.description && t.description.length > 20, t.name);
  }
  const runTask = tools.find((t) => t.name === 'run_task')!;
  assert.deepEqual(runTask.inputSchema.required, ['task']);
  assert.equal(runTask.annotations?.readOnlyHint, false);
  assert.equal(tools.find((t) => t.name === 'get_run')!.annotations?.readOnlyHint, true);

  // run_task completes a builtin run and reports each step as progress.
  const progress: string[] = [];
  const run = await ok<RunOut>(client, 'run_task', { task: `Open ${site}/run-table.html. Extract the table as JSON.`, model: 'builtin' }, { onprogress: (p) => void progress.push(p.message ?? ''), resetTimeoutOnProgress: true });
  assert.equal(run.done, true);
  assert.equal(run.status, 'completed', run.error ?? '');
  assert.match(run.result!, /Lamp/);
  assert.match(run.result!, /Desk/);
  assert.equal(run.next, null);
  // The run's browser's live view (null only when the live-view service could not mint a link in time).
  if (run.live_view_url !== null) assert.match(run.live_view_url, /^https?:\/\/.+\/browsers\/brw_\w+\?token=/);
  assert.ok(run.steps >= 2, String(run.steps));
  assert.match(progress[0]!, new RegExp(`^step 1: navigate ${site}/run-table\\.html`));
  assert.equal(progress.length, run.steps);

  const got = await ok<RunOut>(client, 'get_run', { run_id: run.run_id });
  assert.deepEqual([got.run_id, got.status, got.result, got.session_id], [run.run_id, 'completed', run.result, run.session_id]);

  const steps = await ok<{ steps: { number: number; action: string; url: string | null; screenshot_url: string | null }[]; has_more: boolean; next_after: number }>(client, 'list_steps', { run_id: run.run_id });
  assert.equal(steps.steps.length, run.steps);
  assert.equal(steps.has_more, false);
  assert.match(steps.steps[0]!.action, /^navigate /);
  assert.equal(steps.steps[0]!.url, `${site}/run-table.html`);
  const first = await ok<typeof steps>(client, 'list_steps', { run_id: run.run_id, limit: 1 });
  assert.deepEqual([first.steps.length, first.has_more, first.next_after], [1, true, 1]);
  const rest = await ok<typeof steps>(client, 'list_steps', { run_id: run.run_id, after: first.next_after });
  assert.equal(rest.steps[0]!.number, 2);

  // An unknown run: a tool error with the API's detail, and the server goes on.
  const missing = await call(client, 'get_run', { run_id: 'run_doesnotexist' });
  assert.equal(missing.isError, true);
  assert.match(text(missing), /^Run not found \(HTTP 404, request id [0-9a-f-]{36}\)$/);
  const badAgent = await call(client, 'get_run', { run_id: run.run_id, agent: 'browsercode' });
  assert.equal(badAgent.isError, true);
  assert.match(text(badAgent), /Run not found/);
  const invalid = await call(client, 'run_task', { task: 'x', wait_seconds: -1 });
  assert.equal(invalid.isError, true);
  assert.match(text(invalid), /wait_seconds/);

  // A run that does not end within the wait: its id to poll, then stopped.
  const slow = await ok<RunOut>(client, 'run_task', { task: 'Run `sleep 60`.', agent: 'browsercode', model: 'builtin', wait_seconds: 0 });
  assert.equal(slow.done, false);
  assert.ok(['queued', 'running'].includes(slow.status), slow.status);
  assert.ok(slow.next!.includes(`get_run with run_id "${slow.run_id}" and agent "browsercode"`), slow.next!);
  const stopped = await ok<RunOut>(client, 'stop_run', { run_id: slow.run_id, agent: 'browsercode' });
  assert.equal(stopped.status, 'stopped');
  const again = await call(client, 'stop_run', { run_id: slow.run_id, agent: 'browsercode' });
  assert.equal(again.isError, true);
  assert.match(text(again), /^Run already stopped \(HTTP 409/);

  // A browser of one's own: CDP and live view, then stopped.
  const browser = await ok<{ browser_id: string; status: string; cdp_url: string; live_view_url: string | null }>(client, 'create_browser', { timeout_minutes: 5 });
  assert.equal(browser.status, 'active');
  assert.match(browser.cdp_url, /^wss?:\/\/.+/);
  // Null only when the live-view service could not mint it in time (a loaded machine).
  if (browser.live_view_url !== null) assert.match(browser.live_view_url, /^https?:\/\/.+token=/);
  const stoppedBrowser = await ok<{ browser_id: string; status: string; stopped_at: string | null }>(client, 'stop_browser', { browser_id: browser.browser_id });
  assert.equal(stoppedBrowser.status, 'stopped');
  assert.ok(stoppedBrowser.stopped_at);

  // The files a run wrote, with download links that work without a key.
  const writer = await ok<RunOut>(client, 'run_task', { task: 'Run `echo hello > hello.txt`.', agent: 'browsercode', model: 'builtin' });
  assert.equal(writer.status, 'completed', writer.error ?? '');
  const files = await ok<{ files: { name: string; kind: string; download_url: string; size_bytes: number }[] }>(client, 'list_run_files', { run_id: writer.run_id, agent: 'browsercode', kind: 'output' });
  assert.deepEqual(files.files.map((f) => [f.name, f.kind, f.size_bytes]), [['hello.txt', 'output', 6]]);
  const download = await fetch(new URL(files.files[0]!.download_url, direct));
  assert.equal(download.status, 200);
  assert.equal(await download.text(), 'hello\n');

  // Profiles of the project.
  const made = (await (await h.fixture.api('/api/v1/browser-profiles', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: `mcp-${Date.now()}` }) })).json()) as { id: string; name: string };
  const profiles = await ok<{ profiles: { id: string; name: string }[] }>(client, 'list_profiles');
  assert.equal(profiles.profiles.find((p) => p.id === made.id)?.name, made.name);
}

describe('the MCP server over stdio (ats mcp)', () => {
  test('when an assistant starts `ats mcp`, then it lists the tools and every tool works, errors as tool errors', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(PKG, 'bin/ats.js'), 'mcp'],
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ATS_API_KEY: h.env.ATS_API_KEY!, ATS_BASE_URL: h.env.ATS_BASE_URL! },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d: Buffer) => (stderr += d));
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(transport);
    try {
      assert.equal(client.getServerVersion()?.name, 'agent-task-service');
      assert.match(client.getInstructions() ?? '', /run_task/);
      await everyTool(client);
    } finally {
      await client.close();
    }
    assert.equal(stderr, '', 'nothing on stderr');
  });
});

describe('the MCP server over Streamable HTTP (the gateway at /mcp)', () => {
  const connect = async (headers: Record<string, string>) => {
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${direct}/mcp`), { requestInit: { headers } }));
    return client;
  };

  test('when an assistant connects with the key as a bearer token, then it lists the tools and every tool works', async () => {
    const client = await connect({ Authorization: `Bearer ${h.env.ATS_API_KEY}` });
    try {
      await everyTool(client);
    } finally {
      await client.close();
    }
  });

  test('when the key comes in X-Service-API-Key, then it acts as that project; another project sees none of its runs', async () => {
    const mine = await connect({ 'X-Service-API-Key': h.env.ATS_API_KEY! });
    const theirs = await connect({ Authorization: `Bearer ${h.env.ATS_TEST_OTHER_KEY}` });
    try {
      const run = await ok<RunOut>(mine, 'run_task', { task: `Open ${site}/run-table.html. Read the heading.`, model: 'builtin' });
      assert.equal(run.result, 'Price list');
      // A run that fails is the tool's answer, not a tool error.
      const failed = await call(mine, 'run_task', { task: 'Fly me to the moon.', model: 'builtin' });
      assert.ok(!failed.isError, text(failed));
      const out = failed.structuredContent as unknown as RunOut;
      assert.deepEqual([out.done, out.status], [true, 'failed']);
      assert.ok(out.error && text(failed).startsWith(`Run ${out.run_id} failed: ${out.error}`), text(failed));
      const other = await call(theirs, 'get_run', { run_id: run.run_id });
      assert.equal(other.isError, true);
      assert.match(text(other), /^Run not found \(HTTP 404/);
    } finally {
      await mine.close();
      await theirs.close();
    }
  });

  test('when /mcp is called without a valid key, then it is 401 with the API detail; GET is 405', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } } };
    const post = (headers: Record<string, string>) =>
      fetch(`${direct}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(init) });
    const refused: Record<string, string>[] = [{}, { Authorization: 'Bearer ats_not_a_key_of_anyone_here' }, { 'X-Service-API-Key': 'ats_not_a_key_of_anyone_here' }];
    for (const headers of refused) {
      const res = await post(headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.deepEqual(await res.json(), { detail: 'Invalid or missing API key' });
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer /);
    }
    const good = await post({ Authorization: `Bearer ${h.env.ATS_API_KEY}` });
    assert.equal(good.status, 200);
    assert.match(await good.text(), /"serverInfo":\{"name":"agent-task-service"/);
    const get = await fetch(`${direct}/mcp`, { headers: { Authorization: `Bearer ${h.env.ATS_API_KEY}`, accept: 'text/event-stream' } });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
  });
});
