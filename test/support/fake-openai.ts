/**
 * A small fake of an OpenAI-compatible server: POST /v1/chat/completions answered per request by
 * a script, in the real wire format (tool_calls, usage). Records every request body.
 */
import http from 'node:http';

/** Token counts of a reply; `cached` becomes usage.prompt_tokens_details.cached_tokens. */
export type FakeUsage = { prompt: number; completion: number; cached?: number };

export type FakeReply =
  | { tool: string; args: Record<string, unknown> | string; usage?: FakeUsage }
  | { tools: { tool: string; args: Record<string, unknown> | string }[]; usage?: FakeUsage }
  | { text: string; usage?: FakeUsage }
  | { status: number; body?: unknown }
  | { hang: true };

export interface ChatRequest {
  model: string;
  messages: { role: string; content: unknown }[];
  tools?: { type: string; function: { name: string } }[];
  tool_choice?: unknown;
}

export interface FakeOpenAI {
  baseUrl: string;
  requests: ChatRequest[];
  /** What the n-th request (0-based) is answered with. */
  script: (req: ChatRequest, n: number) => FakeReply;
  close(): Promise<void>;
}

/** The text of the last user message (the page state the agent sent). */
export function userText(req: ChatRequest): string {
  const last = [...req.messages].reverse().find((m) => m.role === 'user');
  const c = last?.content;
  return typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: string }) => p.text ?? '').join('') : '';
}

/** The [index] of the element whose line matches `pattern` in the page state (`*[index]` when new). */
export function elementIndex(req: ChatRequest, pattern: RegExp): number {
  const line = userText(req).split('\n').find((l) => /^\*?\[\d+\]/.test(l) && pattern.test(l));
  if (!line) throw new Error(`no element matching ${pattern} in the request`);
  return Number(/^\*?\[(\d+)\]/.exec(line)![1]);
}

export async function startFakeOpenAI(): Promise<FakeOpenAI> {
  const fake: FakeOpenAI = {
    baseUrl: '',
    requests: [],
    script: () => ({ text: 'no script' }),
    close: async () => {},
  };
  const hanging: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse(body) as ChatRequest;
      const n = fake.requests.push(parsed) - 1;
      let reply: FakeReply;
      try {
        reply = fake.script(parsed, n);
      } catch (err) {
        reply = { status: 500, body: { error: { message: (err as Error).message } } };
      }
      if ('hang' in reply) {
        hanging.push(res);
        return;
      }
      if ('status' in reply) {
        res.writeHead(reply.status, { 'Content-Type': 'application/json' }).end(JSON.stringify(reply.body ?? { error: { message: 'upstream exploded', type: 'server_error' } }));
        return;
      }
      const usage: FakeUsage = reply.usage ?? { prompt: 100, completion: 10 };
      const calls = 'tools' in reply ? reply.tools : 'tool' in reply ? [reply] : [];
      const message = calls.length
        ? { role: 'assistant', content: null, tool_calls: calls.map((c, i) => ({ id: `call_${n}_${i}`, type: 'function', function: { name: c.tool, arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args) } })) }
        : { role: 'assistant', content: 'text' in reply ? reply.text : '' };
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({
          id: `chatcmpl-${n}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: parsed.model,
          choices: [{ index: 0, message, finish_reason: calls.length ? 'tool_calls' : 'stop' }],
          usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion, ...(usage.cached ? { prompt_tokens_details: { cached_tokens: usage.cached } } : {}) },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
  fake.close = () =>
    new Promise<void>((r) => {
      for (const h of hanging) h.destroy();
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
