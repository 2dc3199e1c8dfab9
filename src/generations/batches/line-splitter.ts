/** A line longer than the splitter's cap: thrown as soon as the cap is passed, before the line's end. */
export class LineTooLong extends Error {
  override readonly name = 'LineTooLong';
  constructor(readonly maxLineBytes: number) {
    super(`A line is longer than ${maxLineBytes} bytes.`);
  }
}

/**
 * Splits a byte stream at `\n` as it arrives (a `\r` before it is dropped too), yielding each line's
 * bytes, the last one whether or not a `\n` ends it. Only the line being read is held, never more
 * than `maxLineBytes` of it: once a line passes the cap, LineTooLong is thrown and nothing more is
 * read. Lines are bytes, so that a character split between two chunks is decoded whole.
 */
export async function* splitLines(
  chunks: AsyncIterable<Buffer> | Iterable<Buffer>,
  maxLineBytes: number,
): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let held = 0;
  for await (const chunk of chunks) {
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      if (held + end - start > maxLineBytes) throw new LineTooLong(maxLineBytes);
      const tail = chunk.subarray(start, end);
      const line = parts.length === 0 ? tail : Buffer.concat([...parts, tail]);
      parts = [];
      held = 0;
      start = end + 1;
      yield line.at(-1) === 13 ? line.subarray(0, -1) : line;
    }
    if (start < chunk.length) {
      held += chunk.length - start;
      if (held > maxLineBytes) throw new LineTooLong(maxLineBytes);
      parts.push(chunk.subarray(start));
    }
  }
  if (held > 0) {
    const line = Buffer.concat(parts);
    yield line.at(-1) === 13 ? line.subarray(0, -1) : line;
  }
}
