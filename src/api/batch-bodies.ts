import type { Readable } from 'node:stream';
import { JSONParser, TokenType } from '@streamparser/json';
import { ApiError } from '../vocabulary/errors.js';
import { NotJsonLine } from '../generations/batches/batch-creation.js';
import { LineTooLong, splitLines } from '../generations/batches/line-splitter.js';

/*
 * The two bodies POST /v1/batches (and its quote) takes, each read as it arrives and never held
 * whole: a JSON object `{"requests": [...], ...envelope}` and JSONL lines (the envelope in the
 * query). Both stop with a 413 past BATCH_BODY_LIMIT_BYTES, and with a 413 naming the line as soon
 * as one line (or, in the JSON form, any other member) passes `lineLimitBytes` (BODY_LIMIT_BYTES:
 * what a POST /v1/generations body may be), reading no further: only one line is ever held.
 */

/** What a batch body may carry: in all, and in one line. */
export interface BatchBodyLimits {
  bodyBytes: number;
  lineBytes: number;
}

/** The lines of a batch's body as they arrive, and its envelope's fields (whole once the lines are read). */
export interface BatchBody {
  lines: AsyncIterable<unknown>;
  envelope: () => Record<string, unknown>;
}

/**
 * The body's chunks, refused with a 413 once more than `limitBytes` have come. The request is not
 * destroyed when reading stops early (its socket would go with it, and the answer): the route
 * answers and closes the connection (batch-routes.ts).
 */
async function* limited(body: Readable, limitBytes: number, form: string): AsyncGenerator<Buffer> {
  let bytes = 0;
  for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > limitBytes)
      throw new ApiError('payload_too_large', `A ${form} batch body is at most ${limitBytes} bytes.`);
    yield chunk;
  }
}

/** Fed to the JSON parser at most this much at a time: a line is measured to within it. */
const sliceBytes = 64 * 1024;

/**
 * The JSON form, parsed as it arrives: each element of the top-level `requests` is handed on as
 * soon as it is complete, and every other top-level member (wherever it stands, before or after
 * `requests`) is kept as the envelope, checked by the envelope's own rules once the body is read.
 * What lies between two of these boundaries (a line, a member, the whitespace around them) is at
 * most `limits.lineBytes`: past it, a 413 naming the line.
 */
export function jsonBatchBody(body: Readable, limits: BatchBodyLimits): BatchBody {
  const envelope: Record<string, unknown> = {};
  let requests: 'absent' | 'array' | 'other' = 'absent';
  async function* lines(): AsyncGenerator<unknown> {
    const ready: unknown[] = [];
    const state: { failure: ApiError | null } = { failure: null };
    // keepStack false: a member is dropped from its parent once emitted, unless an ancestor is to
    // be emitted too, as `requests` is (it matches `$.*`): each line is taken out of it below.
    // Strings gathered in a 64 KiB typed array rather than by concatenation: half the parse time
    // of a 19 MB body here, and less garbage.
    const parser = new JSONParser({
      paths: ['$.requests.*', '$.*'],
      keepStack: false,
      stringBufferSize: 64 * 1024,
    });
    const extent = new LineExtent();
    parser.onToken = (token) => extent.token(token.token, token.value, token.offset);
    let emitted = 0;
    parser.onValue = ({ value, key, parent, stack }) => {
      if (stack.length === 2) {
        ready.push(value);
        emitted++;
        (parent as unknown[]).length = 0;
      } else if (Array.isArray(parent)) state.failure ??= notAnObject();
      else if (key !== 'requests') envelope[key as string] = value;
      else if (requests !== 'absent') state.failure ??= requestsIssue('`requests` is given twice.');
      else requests = Array.isArray(value) ? 'array' : 'other';
    };
    parser.onError = (error) => {
      state.failure ??= invalidJson(error.message);
    };
    let fed = 0;
    for await (const chunk of limited(body, limits.bodyBytes, 'JSON')) {
      for (let at = 0; at < chunk.length; at += sliceBytes) {
        const slice = chunk.subarray(at, at + sliceBytes);
        parser.write(slice);
        fed += slice.length;
        if (state.failure) throw state.failure;
        if (fed - extent.boundary > limits.lineBytes)
          throw lineTooLarge(
            extent.inRequests ? `requests[${emitted}]` : 'A member of the body beside `requests`',
            limits.lineBytes,
          );
      }
      yield* ready.splice(0);
    }
    if (!parser.isEnded) parser.end();
    if (state.failure) throw state.failure;
    if (requests !== 'array') throw requestsIssue('Expected an array of request lines.');
  }
  return { lines: lines(), envelope: () => envelope };
}

/**
 * Where the line (or top-level member) being read began, from the parser's tokens: the offset of
 * the last token that stands between lines or members (depth 1, or depth 2 inside `requests`).
 */
class LineExtent {
  boundary = 0;
  inRequests = false;
  private depth = 0;
  private lastKey: unknown = undefined;

  token(type: TokenType, value: unknown, offset: number): void {
    const between = this.depth <= 1 || (this.inRequests && this.depth === 2);
    if (type === TokenType.LEFT_BRACE || type === TokenType.LEFT_BRACKET) {
      if (this.depth === 1 && type === TokenType.LEFT_BRACKET && this.lastKey === 'requests')
        this.inRequests = true;
      if (between) this.boundary = offset;
      this.depth++;
      return;
    }
    if (type === TokenType.RIGHT_BRACE || type === TokenType.RIGHT_BRACKET) {
      this.depth--;
      if (this.depth === 1) this.inRequests = false;
      if (this.depth <= 1 || (this.inRequests && this.depth === 2)) this.boundary = offset;
      return;
    }
    if (this.depth === 1 && type === TokenType.STRING) this.lastKey = value;
    if (between) this.boundary = offset;
  }
}

/** The JSONL form: each non-blank line parsed; a line that is not JSON is handed on as a NotJsonLine (refused by its check). */
export function jsonlBatchBody(
  body: Readable,
  limits: BatchBodyLimits,
  envelope: Record<string, unknown>,
): BatchBody {
  async function* lines(): AsyncGenerator<unknown> {
    let index = 0;
    try {
      for await (const bytes of splitLines(limited(body, limits.bodyBytes, 'JSONL'), limits.lineBytes)) {
        const line = bytes.toString('utf8');
        if (line.trim() === '') continue;
        index++;
        try {
          yield JSON.parse(line) as unknown;
        } catch {
          yield new NotJsonLine(line);
        }
      }
    } catch (error) {
      if (error instanceof LineTooLong) throw lineTooLarge(`Line ${index}`, limits.lineBytes);
      throw error;
    }
  }
  return { lines: lines(), envelope: () => envelope };
}

/** A line past its cap: refused at once, the rest of the body unread. */
function lineTooLarge(name: string, lineBytes: number): ApiError {
  return new ApiError(
    'payload_too_large',
    `${name} is larger than ${lineBytes} bytes, the most one request line may be (the body limit of POST /v1/generations). Nothing was created.`,
  );
}

function requestsIssue(message: string): ApiError {
  return new ApiError('invalid_request', 'The body needs `requests`: an array of request lines.', {
    issues: [{ field: 'requests', code: 'required', message }],
  });
}

function notAnObject(): ApiError {
  return new ApiError('invalid_request', 'The body must be a JSON object with `requests`.', {
    issues: [{ field: '', code: 'invalid_type', message: 'Expected an object.' }],
  });
}

function invalidJson(detail: string): ApiError {
  return new ApiError('invalid_request', 'The body is not valid JSON.', {
    issues: [{ field: '', code: 'invalid_json', message: detail }],
  });
}
