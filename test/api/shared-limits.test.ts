import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createApiService, type ApiService } from '../../src/api/service.js';
import { generateApiKey } from '../../src/auth/api-key.js';
import { loadConfig } from '../../src/config/service-config.js';
import { freePort } from '../../src/dev/free-port.js';
import type { RunningValkey } from '../../src/dev/valkey-server.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestRedis } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const unreachable = 'Redis unreachable or not answering';
const backAgain = 'Redis reachable again';
const occurrences = (text: string, phrase: string) => text.split(phrase).length - 1;

/**
 * Two real API processes (`npm run api`), sharing nothing but PostgreSQL and one Redis server, behind
 * one trusted proxy (TRUST_PROXY=1): the client's address is the last X-Forwarded-For entry.
 */
describe('two API processes share both limits through Redis (REDIS_URL)', () => {
  let db: TestDatabase;
  let redis: RunningValkey;
  let apis: ApiProcess[] = [];
  let ipCounter = 0;
  /** A fresh client address (documentation range) per use, so one test's failures never block another. */
  const nextIp = () => `203.0.113.${++ipCounter}`;
  const get = (api: ApiProcess, key: string, client: string) =>
    fetch(`${api.origin}/v1/credits`, { headers: { ...bearer(key), 'x-forwarded-for': client } });

  beforeAll(async () => {
    db = await createTestDatabase();
    redis = await startTestRedis();
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      REDIS_TIMEOUT_MS: '250',
      RATE_LIMIT_PER_MINUTE: '6',
      TRUST_PROXY: '1',
      LOG_LEVEL: 'info',
    };
    apis = await Promise.all([startApiProcess(env), startApiProcess(env)]);
  });
  afterAll(async () => {
    await Promise.all(apis.map((api) => api.stop()));
    await redis?.stop();
    await db?.drop();
  });

  it('the 21st failed authentication from one address is refused by both, wherever the 20 went; a good key is not', async () => {
    const alice = await createPaidAccount(db.pool);
    const client = nextIp();
    for (let i = 0; i < 20; i++) expect((await get(apis[i % 2]!, generateApiKey(), client)).status).toBe(401);
    for (const api of apis) {
      const refused = await get(api, generateApiKey(), client);
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      // A good key from that address is let through (a shared NAT's other customers), on both.
      expect((await get(api, alice.key, client)).status).toBe(200);
      expect((await get(api, generateApiKey(), nextIp())).status).toBe(401);
    }
  });

  it("one key's requests are counted once, across both processes", async () => {
    const bob = await createPaidAccount(db.pool);
    const client = nextIp();
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await get(apis[i % 2]!, bob.key, client));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(answers.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual([
      '5',
      '4',
      '3',
      '2',
      '1',
      '0',
    ]);
    for (const api of apis) {
      const refused = await get(api, bob.key, client);
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      expect(refused.headers.get('x-ratelimit-limit')).toBe('6');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // Another key is unaffected.
    const carol = await createPaidAccount(db.pool);
    expect((await get(apis[0]!, carol.key, client)).status).toBe(200);
  });

  it('a Redis that stops answering costs a request at most REDIS_TIMEOUT_MS, never an error', async () => {
    const dave = await createPaidAccount(db.pool);
    const logsBefore = apis.map((api) => api.logs().length);
    redis.process.kill('SIGSTOP');
    try {
      for (const api of apis) {
        for (let i = 0; i < 5; i++) {
          const started = Date.now();
          const answer = await get(api, dave.key, nextIp());
          expect(answer.status).toBe(200);
          // 250 ms of timeout, then memory; later requests skip Redis at once for a while.
          expect(Date.now() - started).toBeLessThan(2_000);
        }
      }
    } finally {
      redis.process.kill('SIGCONT');
    }
    // Each process said so once, and says when Redis answers again.
    await waitFor(async () => {
      await Promise.all(apis.map((api) => get(api, dave.key, nextIp())));
      return apis.every((api, i) => api.logs().slice(logsBefore[i]).includes(backAgain));
    }, 10_000);
    for (const [i, api] of apis.entries())
      expect(occurrences(api.logs().slice(logsBefore[i]), unreachable)).toBe(1);
  });

  it('with Redis stopped, each process counts on its own (one warning each); restarted, they share again', async () => {
    const erin = await createPaidAccount(db.pool);
    const logsBefore = apis.map((api) => api.logs().length);
    await redis.stop();

    // Fail open to this process's memory: answers as usual, limits per process as without REDIS_URL.
    const client = nextIp();
    for (let i = 0; i < 20; i++) expect((await get(apis[0]!, generateApiKey(), client)).status).toBe(401);
    expect((await get(apis[0]!, generateApiKey(), client)).status).toBe(429);
    expect((await get(apis[1]!, generateApiKey(), client)).status).toBe(401);
    for (const api of apis) expect((await get(api, erin.key, nextIp())).status).toBe(200);
    for (const [i, api] of apis.entries())
      expect(occurrences(api.logs().slice(logsBefore[i]), unreachable)).toBe(1);

    // Back at the same address (empty: counts restart): both reconnect by themselves and share again.
    redis = await startTestRedis(redis.port);
    await waitFor(
      () => Promise.resolve(apis.every((api, i) => api.logs().slice(logsBefore[i]).includes(backAgain))),
      10_000,
    );
    const next = nextIp();
    for (let i = 0; i < 20; i++) expect((await get(apis[i % 2]!, generateApiKey(), next)).status).toBe(401);
    for (const api of apis) expect((await get(api, generateApiKey(), next)).status).toBe(429);
  });
});

describe('an unreachable REDIS_URL at start', () => {
  let db: TestDatabase;
  let api: ApiService | undefined;
  let redis: RunningValkey | undefined;
  afterAll(async () => {
    await api?.close();
    await redis?.stop();
    await db?.drop();
  });

  it('the API starts, counts in memory, and moves its counting to Redis once it appears', async () => {
    db = await createTestDatabase();
    const port = await freePort(); // nothing listens there yet
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    api = await createApiService(
      loadConfig({
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        DATABASE_POOL_SIZE: '3',
        REDIS_URL: `redis://127.0.0.1:${port}`,
      }),
      logger,
    );
    const frank = await createPaidAccount(db.pool);
    const get = (key: string, remoteAddress: string) =>
      api!.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(key), remoteAddress });

    expect((await get(frank.key, '198.51.100.1')).statusCode).toBe(200);
    for (let i = 0; i < 20; i++) expect((await get(generateApiKey(), '198.51.100.2')).statusCode).toBe(401);
    expect((await get(generateApiKey(), '198.51.100.2')).statusCode).toBe(429);
    expect(lines.filter((line) => line.includes(unreachable))).toHaveLength(1);
    expect(lines.join('')).not.toContain('redis://'); // the URL may hold a password: the log names host:port

    redis = await startTestRedis(port);
    await waitFor(() => Promise.resolve(lines.some((line) => line.includes(backAgain))), 10_000);
    expect((await get(frank.key, '198.51.100.1')).statusCode).toBe(200);
    const peek = new Redis(redis.url);
    try {
      expect(await peek.get(`ratelimit:key:${frank.keyId}`)).toBe('1');
    } finally {
      peek.disconnect();
    }
  });
});
