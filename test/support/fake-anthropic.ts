/**
 * A small fake of the Anthropic Messages API: POST /v1/messages answered per request by a
 * script, in the real wire format (tool_use content blocks, stop_reason, usage, error bodies).
 * Records every request with the headers that matter (key, version).
 */
import http from 'node:http';

/** Token counts of a reply; `cacheRead` becomes usage.cache_read_input_tokens. */
export type AnthropicUsage = { input: number; output: number; cacheRead?: number };

export type AnthropicReply =
  | { tool: string; input: Record<string, unknown>; usage?: AnthropicUsage }
  | { text: string; usage?: AnthropicUsage }
  | { status: number; type: string; message: string };

export interface AnthropicRequest {
  headers: { apiKey: string; version: string };
  body: {
    model: string;
    system?: unknown;
    messages: { role: string; content: unknown }[];
    tools?: { name: string }[];
    tool_choice?: { type: string };
  };
}

export interface FakeAnthropic {
  /** Base URL including /v1, as ANTHROPIC_BASE_URL wants it. */
  baseUrl: string;
  requests: AnthropicRequest[];
  script: (req: AnthropicRequest, n: number) => AnthropicReply;
  close(): Promise<void>;
}

/** The text of the last user message. */
export function anthropicUserText(req: AnthropicRequest): string {
  const last = [...req.body.messages].reverse().find((m) => m.role === 'user');
  const c = last?.content;
  return typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: string }) => p.text ?? '').join('') : '';
}

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const fake: FakeAnthropic = { baseUrl: '', requests: [], script: () => ({ text: 'no script' }), close: async () => {} };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/messages') {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'Not found' } }));
        return;
      }
      const parsed: AnthropicRequest = { headers: { apiKey: String(req.headers['x-api-key'] ?? ''), version: String(req.headers['anthropic-version'] ?? '') }, body: JSON.parse(raw) };
      const n = fake.requests.push(parsed) - 1;
      const reply = fake.script(parsed, n);
      if ('status' in reply) {
        res.writeHead(reply.status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: reply.type, message: reply.message } }));
        return;
      }
      const usage: AnthropicUsage = reply.usage ?? { input: 120, output: 12 };
      const content = 'tool' in reply ? [{ type: 'tool_use', id: `toolu_${n}`, name: reply.tool, input: reply.input }] : [{ type: 'text', text: reply.text }];
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({
          id: `msg_${n}`,
          type: 'message',
          role: 'assistant',
          model: parsed.body.model,
          content,
          stop_reason: 'tool' in reply ? 'tool_use' : 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: usage.output, ...(usage.cacheRead ? { cache_read_input_tokens: usage.cacheRead } : {}) },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
  fake.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
