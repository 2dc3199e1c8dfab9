import { describe, expect, it } from 'vitest';
import { sseMessages, type SseMessage } from '../../clients/typescript/src/core/sse.js';

/** The messages read from a body that arrives in these pieces (bytes, so a character may be cut too). */
async function read(pieces: Uint8Array[]): Promise<SseMessage[]> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });
  const messages: SseMessage[] = [];
  for await (const message of sseMessages(body)) messages.push(message);
  return messages;
}

const bytes = (text: string) => new TextEncoder().encode(text);

describe('the TypeScript client reads text/event-stream bodies', () => {
  it('a CRLF cut between its CR and its LF is one line end: a two-line data field stays one message', async () => {
    expect(await read([bytes('data: a\r'), bytes('\ndata: b\r\n\r\n')])).toEqual([{ data: 'a\nb' }]);
  });

  it('gives the same messages however the body is cut in two, with CRLF, CR and LF line ends alike', async () => {
    const text =
      'retry: 1000\r\n\r\n: keep-alive\r\n\r\ndata: {"id":1}\r\ndata: "ünïcode"\r\n\r\n' +
      'data: two\rdata: lines\r\rdata: last\n\n';
    const whole = await read([bytes(text)]);
    expect(whole).toEqual([
      { retry: 1000 },
      { data: '{"id":1}\n"ünïcode"' },
      { data: 'two\nlines' },
      { data: 'last' },
    ]);
    const all = bytes(text);
    for (let cut = 1; cut < all.length; cut++)
      expect(await read([all.slice(0, cut), all.slice(cut)]), `cut at byte ${cut}`).toEqual(whole);
  });

  it('reads the id and event fields; an id alone is a message (it moves the place to resume from)', async () => {
    expect(
      await read([bytes('id: c1\nevent: generation.created\ndata: {}\n\n: keep-alive\n\nid: c2\n\n')]),
    ).toEqual([{ id: 'c1', event: 'generation.created', data: '{}' }, { id: 'c2' }]);
  });

  it('a CR that ends the body still ends its line (the last message is not lost)', async () => {
    expect(await read([bytes('data: end\r'), bytes('\r')])).toEqual([{ data: 'end' }]);
  });
});
