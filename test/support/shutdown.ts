import { once } from 'node:events';
import type { Server } from 'node:http';
import net from 'node:net';
import { expect } from 'vitest';

/** What `what` settled to, or 'still waiting' after `ms` (the waits checked here were 72 s). */
const within = <T>(ms: number, what: Promise<T>) =>
  Promise.race([what, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms))]);

/**
 * A server's shutdown waits for the requests in flight only: `close()` is called with two connections
 * open, one that never sent a request (Node's fetch leaves one after each aborted event stream,
 * nodejs/undici#5845; once closing, Node neither expires it nor counts it idle) and one whose
 * request (`head`, then `body`) is still arriving. The first must be closed at once; the second
 * answered (`answer`) and then closed rather than kept alive (72 s), and close() must then resolve.
 */
export async function expectPromptShutdown(options: {
  server: Server;
  port: number;
  close: () => Promise<unknown>;
  /** The request line and headers, without the blank line that ends them. */
  head: string[];
  /** Its body: the first 10 characters are sent before close() starts, the rest after. */
  body: string;
  /** What the answer's start must match (its status line). */
  answer: RegExp;
}): Promise<void> {
  const unused = net.connect(options.port, '127.0.0.1');
  const unusedClosed = once(unused, 'close').then(() => 'closed');
  await once(unused, 'connect');
  const inFlight = net.connect(options.port, '127.0.0.1');
  let answer = '';
  inFlight.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  const inFlightClosed = once(inFlight, 'close').then(() => 'closed');
  const arrived = once(options.server, 'request');
  inFlight.write([...options.head, '', options.body.slice(0, 10)].join('\r\n'));
  await arrived;

  const closing = options.close().then(() => 'closed');
  try {
    // Each step is waited for whatever the one before did, so that a failure shows all three.
    const noRequest = await within(3000, unusedClosed);
    inFlight.write(options.body.slice(10));
    const answered = await within(3000, inFlightClosed);
    const closed = await within(3000, closing);
    expect({ noRequest, answered, closed }).toEqual({
      noRequest: 'closed',
      answered: 'closed',
      closed: 'closed',
    });
    expect(answer).toMatch(options.answer);
  } finally {
    unused.destroy();
    inFlight.destroy();
    await closing;
  }
}
