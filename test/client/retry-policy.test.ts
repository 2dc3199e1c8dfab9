import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BrowserNotSupportedError,
  Client,
  MissingApiKeyError,
  backoffMs,
  parseRetryAfter,
  retryableStatuses,
} from '../../clients/typescript/src/index.js';

describe('the retry policy', () => {
  it('retries the transient statuses only: never another 4xx (409 idempotency_conflict included)', () => {
    expect([...retryableStatuses].sort()).toEqual([408, 429, 500, 502, 503, 504]);
    for (const status of [400, 401, 402, 403, 404, 409, 413, 415])
      expect(retryableStatuses.has(status)).toBe(false);
  });

  it('Retry-After: delta-seconds or an HTTP date, as milliseconds; junk is ignored', () => {
    const now = Date.parse('2026-11-25T12:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter('0.5', now)).toBe(500);
    expect(parseRetryAfter('Wed, 25 Nov 2026 12:00:07 GMT', now)).toBe(7000);
    expect(parseRetryAfter('Wed, 25 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter(null, now)).toBeNull();
    expect(parseRetryAfter('soon', now)).toBeNull();
  });

  it('backoff: full jitter under 0.5 s × 2ⁿ, capped at 8 s, and a fractional delay is a delay', () => {
    expect(backoffMs(0, () => 0.999)).toBeCloseTo(499.5);
    expect(backoffMs(3, () => 0.5)).toBe(2000);
    expect(backoffMs(10, () => 0.999)).toBeCloseTo(7992);
    expect(backoffMs(2, () => 0.3)).toBeCloseTo(600);
  });
});

describe('constructing a client', () => {
  const global = globalThis as { window?: unknown; document?: unknown };
  afterEach(() => {
    delete global.window;
    delete global.document;
  });

  it('refuses to run in a browser unless told to, and says why (no CORS by design)', () => {
    global.window = {};
    global.document = {};
    expect(() => new Client({ apiKey: 'k' })).toThrow(BrowserNotSupportedError);
    expect(() => new Client({ apiKey: 'k' })).toThrow(/no CORS/);
    expect(() => new Client({ apiKey: 'k', dangerouslyAllowBrowser: true })).not.toThrow();
  });

  it('reads GENERATION_API_KEY and GENERATION_BASE_URL; without a key it says where one goes', () => {
    const saved = { key: process.env.GENERATION_API_KEY, url: process.env.GENERATION_BASE_URL };
    try {
      delete process.env.GENERATION_API_KEY;
      expect(() => new Client()).toThrow(MissingApiKeyError);
      process.env.GENERATION_API_KEY = 'from-env';
      process.env.GENERATION_BASE_URL = 'http://api.example.test/v1/';
      expect(new Client().baseURL).toBe('http://api.example.test/v1');
      delete process.env.GENERATION_BASE_URL;
      expect(new Client().baseURL).toBe('http://127.0.0.1:8080/v1');
    } finally {
      if (saved.key === undefined) delete process.env.GENERATION_API_KEY;
      else process.env.GENERATION_API_KEY = saved.key;
      if (saved.url === undefined) delete process.env.GENERATION_BASE_URL;
      else process.env.GENERATION_BASE_URL = saved.url;
    }
  });

  it('no object of a client holds its API key where printing or walking it would show it', () => {
    // Error trackers and loggers walk objects; util.inspect shows non-enumerable properties too.
    const apiKey = 'gsk_live_NeverPrintThisKey0123456789';
    const client = new Client({ apiKey, baseURL: 'http://api.example.test/v1' });
    for (const object of [client, client.generations, client.models, client.credits, client.webhooks]) {
      expect(inspect(object, { depth: null, showHidden: true })).not.toContain(apiKey);
      expect(JSON.stringify(object) ?? '').not.toContain(apiKey);
    }
  });
});
