import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { workerProcesses, type WorkerProcesses } from '../support/worker-process.js';

/** The worker process's health port, as `npm run worker` opens it with WORKER_HEALTH_PORT. */
describe('health and readiness of the worker', () => {
  let db: TestDatabase;
  let workers: WorkerProcesses;
  let origin: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    workers = workerProcesses(() => ({
      DATABASE_URL: db.url,
      TEMPORAL_TASK_QUEUE: `health-${randomBase62(8)}`,
      WORKER_HEALTH_PORT: String(port),
      LOG_LEVEL: 'warn',
    }));
    await workers.start();
  });
  afterAll(async () => {
    workers?.killAll();
    await db?.drop();
  });

  it('is alive and ready while PostgreSQL and Temporal answer and it polls; serves nothing else', async () => {
    const alive = await fetch(`${origin}/healthz`);
    expect(alive.status).toBe(200);
    expect(await alive.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${origin}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', temporal: 'ok', worker: 'ok' },
    });
    expect((await fetch(`${origin}/v1/generations`)).status).toBe(404);
  });
});
