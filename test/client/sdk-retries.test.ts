import { afterEach, describe, expect, it } from 'vitest';
import {
  Client,
  ConnectionError,
  InvalidRequestError,
  RateLimitError,
  type RetryEvent,
} from '../../clients/typescript/src/index.js';
import { freePort } from '../../src/dev/free-port.js';
import { startFaultyFront, type FaultRule, type FaultyFront } from '../support/faulty-front.js';
import { chargesOf } from '../support/ledger.js';
import { generationCount, useListeningStack } from './client-stack.js';

const createLine = 'POST /v1/generations ';

describe('the client retries a create with one key and never charges twice (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 1000 } });
  let front: FaultyFront | undefined;
  afterEach(async () => {
    await front?.close();
    front = undefined;
  });

  async function clientBehind(rules: FaultRule[], retries: RetryEvent[] = []) {
    front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, rules);
    return new Client({
      apiKey: stack.account.key,
      baseURL: `${front.origin}/v1`,
      onRetry: (event) => retries.push(event),
    });
  }

  it('run(): the first answer of the POST is lost after the API processed it; the retry replays it: one debit, one workflow, one submission', async () => {
    const before = await generationCount(stack.db.pool, stack.account.accountId);
    const retries: RetryEvent[] = [];
    const client = await clientBehind([{ requestLine: createLine, fault: { kind: 'drop-answer' } }], retries);

    const done = await client.generations.run({ model: 'lumen-lite', prompt: 'a lighthouse, answer lost' });

    expect(front!.remaining()).toEqual([0]); // the fault did happen
    expect(retries).toHaveLength(1);
    expect(retries[0]!.error).toBeInstanceOf(ConnectionError);
    // The same key on both attempts: the one the result names.
    expect(retries[0]!.idempotencyKey).toBe(done.idempotencyKey);
    expect(front!.requests.filter((r) => r.line.startsWith(createLine))).toHaveLength(2);
    expect(done.status).toBe('succeeded');
    expect(await generationCount(stack.db.pool, stack.account.accountId)).toBe(before + 1);
    expect(await chargesOf(stack.db.pool, done.id)).toEqual({
      debits: 1,
      refunds: 0,
      net: -2,
      submissions: 1,
    });
  });

  it('503 then 202: retried with the same key, one generation', async () => {
    const before = await generationCount(stack.db.pool, stack.account.accountId);
    const retries: RetryEvent[] = [];
    const client = await clientBehind(
      [{ requestLine: createLine, fault: { kind: 'answer', status: 503 } }],
      retries,
    );
    const created = await client.generations.create({ model: 'lumen-lite', prompt: 'after a 503' });
    expect(retries.map((r) => r.status)).toEqual([503]);
    expect(retries[0]!.idempotencyKey).toBe(created.idempotencyKey);
    expect(created.status).toBe('queued');
    expect(await generationCount(stack.db.pool, stack.account.accountId)).toBe(before + 1);
    expect((await chargesOf(stack.db.pool, created.id)).debits).toBe(1);
  });

  it('429 with Retry-After: 2 is honoured: the retry comes two seconds later, not sooner', async () => {
    const retries: RetryEvent[] = [];
    const client = await clientBehind(
      [{ requestLine: createLine, fault: { kind: 'answer', status: 429, headers: { 'retry-after': '2' } } }],
      retries,
    );
    await client.generations.create({ model: 'lumen-lite', prompt: 'after a 429' });
    const [first, second] = front!.requests.filter((r) => r.line.startsWith(createLine));
    const gap = second!.at - first!.at;
    expect(retries).toMatchObject([{ status: 429, delayMs: 2000 }]);
    expect(gap).toBeGreaterThanOrEqual(1990);
    expect(gap).toBeLessThan(4000);
    console.log(`429 Retry-After: 2 → the retry came ${gap} ms after the first attempt`);
  });

  it('a Retry-After beyond 60 s is not slept through: RateLimitError with retryAfterMs, at once', async () => {
    const client = await clientBehind([
      { requestLine: createLine, fault: { kind: 'answer', status: 429, headers: { 'retry-after': '120' } } },
    ]);
    const error = await client.generations
      .create({ model: 'lumen-lite', prompt: 'too long to wait' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429, code: 'rate_limited', retryAfterMs: 120_000 });
    expect((error as RateLimitError).idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(front!.requests).toHaveLength(1);
  });

  it('a 400 is not retried: InvalidRequestError with the issues, the request id and the key', async () => {
    const retries: RetryEvent[] = [];
    const client = await clientBehind([], retries);
    const error = await client.generations
      .create({ model: 'lumen-lite', prompt: 'x', quality: 'cinematic' }, { idempotencyKey: 'my-key-400' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ status: 400, code: 'invalid_request', idempotencyKey: 'my-key-400' });
    expect((error as InvalidRequestError).issues).toEqual([expect.objectContaining({ field: 'quality' })]);
    expect((error as InvalidRequestError).requestId).toMatch(/^gen_/);
    expect(retries).toEqual([]);
    expect(front!.requests).toHaveLength(1);
  });

  it('network errors are retried maxRetries times with backoff, and the error carries the key', async () => {
    const port = await freePort(); // nothing listens there
    const retries: RetryEvent[] = [];
    const client = new Client({
      apiKey: stack.account.key,
      baseURL: `http://127.0.0.1:${port}/v1`,
      maxRetries: 2,
      onRetry: (event) => retries.push(event),
    });
    const error = await client.generations
      .create({ model: 'lumen-lite', prompt: 'nobody home' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as ConnectionError).message).toContain('ECONNREFUSED');
    expect(retries).toHaveLength(2);
    expect(new Set(retries.map((r) => r.idempotencyKey))).toEqual(
      new Set([(error as ConnectionError).idempotencyKey]),
    );
    // Full jitter under 0.5 s × 2ⁿ: never above the cap of each retry.
    expect(retries[0]!.delayMs).toBeLessThan(500);
    expect(retries[1]!.delayMs).toBeLessThan(1000);
  });
});
