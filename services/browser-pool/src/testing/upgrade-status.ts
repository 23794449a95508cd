/** Test support: what the CDP proxy answers a WebSocket upgrade with, without speaking WebSocket after it. */
import http from 'node:http';

/** The HTTP status of a WebSocket upgrade of `wsUrl` (101 when accepted), sent with `headers`. */
export function upgradeStatus(wsUrl: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(wsUrl);
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode!);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}
