/** A parser of server-sent events (the `text/event-stream` format) over a fetch body. */

/** One server-sent event. */
export interface ServerSentEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/**
 * Yields each event of `body` as it completes. `onChunk` is called on every chunk received
 * (heartbeats too), so the caller can tell a quiet stream from a dead one.
 */
export async function* parseSse(body: ReadableStream<Uint8Array>, onChunk: () => void = () => undefined): AsyncGenerator<ServerSentEvent, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | undefined;
  let event: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onChunk();
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        // A lone \r at the end of the buffer may be the first half of \r\n: wait for more.
        if (buffer[nl] === '\r' && nl === buffer.length - 1) break;
        buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length) yield { id, event, data: data.join('\n') };
          event = undefined;
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue; // a comment (the server's keep-alive)
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
        else if (field === 'id' && !value.includes('\0')) id = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
