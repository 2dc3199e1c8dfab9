import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/process/logger.js';
import { buildResultHost } from '../../src/result-host/server.js';

describe('health and readiness of the result host', () => {
  it('is alive, ready while its storage can be read, and not ready once it cannot', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'result-host-'));
    const host = await buildResultHost({ storageDir: dir, logger: createLogger('results-test', 'silent') });
    try {
      expect((await host.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
      const ready = await host.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(200);
      expect(ready.json()).toEqual({ status: 'ready', checks: { storage: 'ok' } });

      await rm(dir, { recursive: true, force: true });
      const gone = await host.inject({ url: '/readyz' });
      expect(gone.statusCode).toBe(503);
      expect(gone.json().checks.storage).toContain('ENOENT');
    } finally {
      await host.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
