export interface SseMessage {
  data?: string;
  retry?: number;
  /** The message's `id` field (an event id, or the account stream's cursor). */
  id?: string;
  /** The message's `event` field (the event type). */
  event?: string;
}

const lineEnd = /\r\n|\r|\n/;

/**
 * The messages of a text/event-stream body (the WHATWG parsing rules, for the fields we use). The
 * body is cancelled when the caller stops reading: that aborts the request and closes its connection.
 */
export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  let message: SseMessage = {};
  try {
    for (;;) {
      const chunk = await reader.read();
      buffer += chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(lineEnd)) >= 0) {
        // A CR that ends what has arrived may be the first half of a CRLF still on its way: taken
        // alone, the LF after it would be an empty line, and end the message there.
        if (!chunk.done && newline === buffer.length - 1 && buffer[newline] === '\r') break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (message.data !== undefined || message.retry !== undefined || message.id !== undefined)
            yield message;
          message = {};
          continue;
        }
        if (line.startsWith(':')) continue; // a comment: the keep-alive
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') message.data = message.data === undefined ? value : `${message.data}\n${value}`;
        else if (field === 'retry' && /^\d+$/.test(value)) message.retry = Number(value);
        else if (field === 'id' && !value.includes('\0')) message.id = value;
        else if (field === 'event') message.event = value;
      }
      if (chunk.done) return; // an unfinished message is dropped, as EventSource does
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
