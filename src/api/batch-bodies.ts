import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { JSONParser } from '@streamparser/json';
import { ApiError } from '../errors.js';
import { NotJsonLine } from '../generations/batch-creation.js';

/*
 * The two bodies POST /v1/batches (and its quote) takes, each read as it arrives and never held
 * whole: a JSON object `{"requests": [...], ...envelope}` and JSONL lines (the envelope in the
 * query). Both stop with a 413 past BATCH_BODY_LIMIT_BYTES.
 */

/** The lines of a batch's body as they arrive, and its envelope's fields (whole once the lines are read). */
export interface BatchBody {
  lines: AsyncIterable<unknown>;
  envelope: () => Record<string, unknown>;
}

/** The body's chunks, refused with a 413 once more than `limitBytes` have come. */
async function* limited(body: Readable, limitBytes: number, form: string): AsyncGenerator<Buffer> {
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > limitBytes)
      throw new ApiError('payload_too_large', `A ${form} batch body is at most ${limitBytes} bytes.`);
    yield chunk;
  }
}

/**
 * The JSON form, parsed as it arrives: each element of the top-level `requests` is handed on as
 * soon as it is complete, and every other top-level member (wherever it stands, before or after
 * `requests`) is kept as the envelope, checked by the envelope's own rules once the body is read.
 */
export function jsonBatchBody(body: Readable, limitBytes: number): BatchBody {
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
    parser.onValue = ({ value, key, parent, stack }) => {
      if (stack.length === 2) {
        ready.push(value);
        (parent as unknown[]).length = 0;
      } else if (Array.isArray(parent)) state.failure ??= notAnObject();
      else if (key !== 'requests') envelope[key as string] = value;
      else if (requests !== 'absent') state.failure ??= requestsIssue('`requests` is given twice.');
      else requests = Array.isArray(value) ? 'array' : 'other';
    };
    parser.onError = (error) => {
      state.failure ??= invalidJson(error.message);
    };
    for await (const chunk of limited(body, limitBytes, 'JSON')) {
      parser.write(chunk);
      if (state.failure) throw state.failure;
      yield* ready.splice(0);
    }
    if (!parser.isEnded) parser.end();
    if (state.failure) throw state.failure;
    if (requests !== 'array') throw requestsIssue('Expected an array of request lines.');
  }
  return { lines: lines(), envelope: () => envelope };
}

/** The JSONL form: each non-blank line parsed; a line that is not JSON is handed on as a NotJsonLine (refused by its check). */
export function jsonlBatchBody(
  body: Readable,
  limitBytes: number,
  envelope: Record<string, unknown>,
): BatchBody {
  async function* lines(): AsyncGenerator<unknown> {
    const input = Readable.from(limited(body, limitBytes, 'JSONL'));
    for await (const line of createInterface({ input, crlfDelay: Infinity })) {
      if (line.trim() === '') continue;
      try {
        yield JSON.parse(line) as unknown;
      } catch {
        yield new NotJsonLine(line);
      }
    }
  }
  return { lines: lines(), envelope: () => envelope };
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
