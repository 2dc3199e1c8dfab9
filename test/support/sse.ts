/** One Server-Sent Events message as a client reads it. */
export interface SseMessage {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/** A Server-Sent Events response read as a browser's EventSource would, message by message. */
export interface SseConnection {
  status: number;
  headers: Headers;
  /** The next message; null when the server ended the stream. */
  next(): Promise<SseMessage | null>;
  /** Every message until the server ends the stream. */
  rest(): Promise<SseMessage[]>;
  /** Comment lines (`: …`) seen so far. */
  comments: string[];
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string>): Promise<SseConnection> {
  const aborter = new AbortController();
  const response = await fetch(url, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: aborter.signal,
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  const comments: string[] = [];
  let buffer = '';
  let ended = !reader;
  const next = async (): Promise<SseMessage | null> => {
    for (;;) {
      const cut = buffer.indexOf('\n\n');
      if (cut >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const message: SseMessage = { id: undefined, event: undefined, data: '' };
        let hasData = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments.push(line);
          else if (line.startsWith('id: ')) message.id = line.slice(4);
          else if (line.startsWith('event: ')) message.event = line.slice(7);
          else if (line.startsWith('data: ')) {
            message.data += (hasData ? '\n' : '') + line.slice(6);
            hasData = true;
          }
        }
        if (hasData) return message;
        continue;
      }
      if (ended) return null;
      const chunk = await reader!.read();
      if (chunk.done) ended = true;
      else buffer += decoder.decode(chunk.value, { stream: true });
    }
  };
  return {
    status: response.status,
    headers: response.headers,
    next,
    async rest() {
      const all: SseMessage[] = [];
      for (let m = await next(); m; m = await next()) all.push(m);
      return all;
    },
    comments,
    close: () => aborter.abort(),
  };
}
