import dgram from 'node:dgram';

export interface TestNameServer {
  /** `127.0.0.1:PORT`, as WEBHOOK_DNS_SERVERS takes it. */
  address: string;
  /** The names asked, in the order the queries came (each try of each query: names repeat). */
  asked: string[];
  /**
   * From now on it answers: every name is at 127.0.0.1 (an A record; no AAAA), the queries held
   * so far first.
   */
  answer(): void;
  close(): Promise<void>;
}

/**
 * A name server on loopback that drops every query, as one under someone else's control may: it
 * reads each query (to record the name asked) and never answers, until `answer()`.
 */
export async function startSilentNameServer(): Promise<TestNameServer> {
  const socket = dgram.createSocket('udp4');
  const asked: string[] = [];
  const held: Array<{ query: Buffer; port: number; address: string }> = [];
  let answering = false;
  const reply = (query: Buffer, port: number, address: string) => socket.send(response(query), port, address);
  socket.on('message', (query, from) => {
    asked.push(question(query).name);
    if (answering) reply(query, from.port, from.address);
    else held.push({ query, port: from.port, address: from.address });
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked,
    answer() {
      answering = true;
      for (const { query, port, address } of held.splice(0)) reply(query, port, address);
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** A query's QNAME (length-prefixed labels after the 12-byte header), and where its question ends. */
function question(query: Buffer): { name: string; end: number; type: number } {
  const labels: string[] = [];
  let at = 12;
  for (; at < query.length && query[at]! > 0; at += query[at]! + 1)
    labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('latin1'));
  // The zero byte, then QTYPE and QCLASS.
  return { name: labels.join('.'), end: at + 5, type: query.readUInt16BE(at + 1) };
}

/** The answer: 127.0.0.1 to an A query, no record (NODATA) to any other. */
function response(query: Buffer): Buffer {
  const { end, type } = question(query);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // the query's id
  header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(type === 1 ? 1 : 0, 6);
  const record = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
  return Buffer.concat([header, query.subarray(12, end), ...(type === 1 ? [record] : [])]);
}
