/**
 * A browser-agent or browsercode run sees what its browser downloaded through the browser-pool:
 * ListDownloads stores the browser's new files and lists them with signed links; a file's bytes
 * are fetched through its link, bounded in size and time.
 */
import type { DownloadSource } from './agents/downloads.js';
import { ActionError } from './agents/page-tools.js';
import type { RunClients } from './clients.js';

/** The downloads of the run's browser (`browserId()`: none while the run has no browser yet). */
export function poolDownloads(clients: RunClients, projectId: string, browserId: () => string | undefined, timeoutMs: number): DownloadSource {
  const list = async () => {
    const id = browserId();
    return id ? (await clients.browserPool.api.listDownloads({ projectId, browserId: id })).items : [];
  };
  return {
    list: async () => (await list()).map((d) => ({ name: d.name, sizeBytes: d.sizeBytes })),
    async read(name, maxBytes) {
      const d = (await list()).find((x) => x.name === name);
      if (!d) throw new ActionError(`The browser no longer has the download ${JSON.stringify(name)}`);
      if (d.sizeBytes > maxBytes) throw new ActionError(`${name} is ${d.sizeBytes} bytes, more than the ${maxBytes} bytes that may be read`);
      const res = await fetch(d.downloadUrl, { signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok || !res.body) throw new Error(`Fetching a download from storage failed: HTTP ${res.status}`);
      const parts: Buffer[] = [];
      let size = 0;
      const reader = res.body.getReader();
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        const chunk = r.value;
        size += chunk.length;
        // The listing said it fits; a file that grew since is cut off rather than read unbounded.
        if (size > maxBytes) {
          await reader.cancel().catch(() => undefined);
          throw new ActionError(`${name} is more than the ${maxBytes} bytes that may be read`);
        }
        parts.push(Buffer.from(chunk));
      }
      return Buffer.concat(parts);
    },
  };
}
