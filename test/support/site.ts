/** Serves test/fixtures/site over real HTTP on 127.0.0.1 (pages the agent tests drive). */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/site');
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.txt': 'text/plain', '.json': 'application/json' };

export interface TestSite {
  url(page: string): string;
  /** Every request the site answered: the Host it was sent to and its path. */
  requests: { host: string; path: string }[];
  close(): Promise<void>;
}

/** Clean URLs as a web server gives them (stand-ins for real sites, such as example.com/pricing): a folder serves its index.html, a name without extension its .html file. */
function servedFile(file: string): string {
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) return path.join(file, 'index.html');
  if (!fs.existsSync(file) && !path.extname(file) && fs.existsSync(`${file}.html`)) return `${file}.html`;
  return file;
}

export async function serveSite(): Promise<TestSite> {
  const requests: TestSite['requests'] = [];
  const server = http.createServer((req, res) => {
    requests.push({ host: req.headers.host ?? '', path: req.url ?? '' });
    const p = path.normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = servedFile(path.join(ROOT, p));
    if (!file.startsWith(ROOT) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: (page) => `http://127.0.0.1:${port}/${page}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
