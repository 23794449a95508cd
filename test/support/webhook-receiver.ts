/** A webhook receiver the tests run: records every request; what it answers is up to the test. */
import http from 'node:http';
import type net from 'node:net';

export interface ReceivedHook {
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
}

/** What to do with a request: answer a status now, or hold it (resolve the promise to answer). */
export type Reply = number | Promise<number>;

export interface WebhookReceiver {
  url: string;
  received: ReceivedHook[];
  /** Decides each answer (default 200). */
  reply: (hook: ReceivedHook) => Reply;
  /** Resolves with the first request (from now) that `match` accepts. */
  next(match?: (h: ReceivedHook) => boolean): Promise<ReceivedHook>;
  /** Resolves with the first request received so far, or from now, that `match` accepts. */
  seen(match: (h: ReceivedHook) => boolean): Promise<ReceivedHook>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const waiters: { match: (h: ReceivedHook) => boolean; resolve: (h: ReceivedHook) => void }[] = [];
  const r: WebhookReceiver = {
    url: '',
    received: [],
    reply: () => 200,
    next(match = () => true) {
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    seen(match) {
      const already = r.received.find(match);
      return already ? Promise.resolve(already) : r.next(match);
    },
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hook: ReceivedHook = { headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])), body: Buffer.concat(chunks).toString('utf8'), receivedAt: Date.now() };
      r.received.push(hook);
      for (const w of waiters.filter((x) => x.match(hook))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(hook);
      }
      void Promise.resolve(r.reply(hook)).then((status) => {
        if (!res.destroyed) res.writeHead(status, { 'content-type': 'text/plain' }).end(status >= 300 ? `nope ${'x'.repeat(1000)}` : 'ok');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks`;
  return r;
}
