import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { bearer, startTestApi } from '../support/api.js';
import { useGenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

describe('health and readiness of the API', () => {
  const stack = useGenerationStack();
  let noTemporal: ApiService;
  let noWorker: ApiService;
  beforeAll(async () => {
    // Nothing listens on port 9 of loopback; nobody polls the other task queue.
    noTemporal = await startTestApi(stack.db.url, {
      ...stack.worker.apiEnv,
      TEMPORAL_ADDRESS: '127.0.0.1:9',
    });
    noWorker = await startTestApi(stack.db.url, {
      ...stack.worker.apiEnv,
      TEMPORAL_TASK_QUEUE: 'nobody-polls',
    });
  });
  afterAll(async () => {
    await noTemporal?.close();
    await noWorker?.close();
  });

  const get = (api: ApiService, url: string, headers: Record<string, string> = {}) =>
    api.app.inject({ method: 'GET', url, headers });

  it('is alive and ready without a key when PostgreSQL, Temporal and a worker are there; neither is logged', async () => {
    const alive = await get(stack.api, '/healthz', bearer(stack.account.key));
    expect(alive.statusCode).toBe(200);
    expect(alive.json()).toEqual({ status: 'ok' });
    const ready = await get(stack.api, '/readyz');
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } });

    // A request that is logged, made after them: once it is in the log, theirs would be too.
    expect((await get(stack.api, '/v1/credits', bearer(stack.account.key))).statusCode).toBe(200);
    const paths = () =>
      stack.db.pool.anyFirst(sql.type(z.object({ path: z.string() }))`
        SELECT path FROM api_request_log WHERE api_key_id = ${stack.account.keyId}`);
    await waitFor(async () => (await paths()).includes('/v1/credits'));
    expect(await paths()).not.toContain('/healthz');
  });

  it('is not ready, saying why, without Temporal or without a worker polling; still alive', async () => {
    const down = await get(noTemporal, '/readyz');
    expect(down.statusCode).toBe(503);
    expect(down.json()).toMatchObject({ status: 'not_ready', checks: { postgres: 'ok' } });
    expect(down.json().checks.temporal).not.toBe('ok');
    expect((await get(noTemporal, '/healthz')).statusCode).toBe(200);

    const idle = await get(noWorker, '/readyz');
    expect(idle.statusCode).toBe(503);
    expect(idle.json().checks.temporal).toBe('no worker polls task queue nobody-polls');
  }, 20_000);

  it('closes cleanly while the probe of an unreachable Temporal is still being retried', async () => {
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', record);
    try {
      const api = await startTestApi(stack.db.url, {
        ...stack.worker.apiEnv,
        TEMPORAL_ADDRESS: '127.0.0.1:9',
      });
      expect((await get(api, '/readyz')).statusCode).toBe(503);
      await api.close();
      // Without a deadline the client retried the probe for about 28 s, and its first retry after the
      // close threw "Channel has been shut down" from a timer, where nothing could catch it.
      await delay(6_000);
    } finally {
      process.off('uncaughtException', record);
    }
    expect(uncaught).toEqual([]);
  }, 30_000);
});
