/** Reads a server-sent event stream until it ends (or `until` says stop). */
export interface SseEvent {
  id: number;
  event: string;
  data: { id: number; type: string; data: Record<string, unknown> };
}

export async function readSse(res: Response, until?: (e: SseEvent) => boolean): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      buf += decoder.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) !== -1) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (block.startsWith(':')) continue;
        const field = (name: string) => block.split('\n').find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
        const ev = { id: Number(field('id')), event: field('event') ?? '', data: JSON.parse(field('data') ?? '{}') };
        out.push(ev);
        if (until?.(ev)) return out;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
