import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, inject, it } from 'vitest';
import { createConsoleService } from '../../src/console/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { createLogger } from '../../src/process/logger.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { expectPromptShutdown } from '../support/shutdown.js';

describe('stopping the console', () => {
  let db: TestDatabase;
  let storageDir: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'console-shutdown-'));
  });
  afterAll(async () => {
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  it('closes at once a connection that never sent a request, and one once its request in flight is answered', async () => {
    const config = loadConfig({
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      STORAGE_DIR: storageDir,
    });
    const service = await createConsoleService(config, createLogger('console-test', 'silent'));
    let closing: Promise<void> | undefined;
    const close = () => (closing ??= service.close());
    try {
      await service.app.listen({ host: '127.0.0.1', port: 0 });
      // A sign-in form whose body is still arriving (its form token is not ours: answered 403 once read).
      const body = 'key=gk_nobody&_csrf=not-this-session';
      await expectPromptShutdown({
        server: service.app.server,
        port: (service.app.server.address() as AddressInfo).port,
        close,
        head: [
          'POST /sign-in HTTP/1.1',
          'Host: 127.0.0.1',
          'Content-Type: application/x-www-form-urlencoded',
          'Cookie: console_form=not-this-form',
          `Content-Length: ${body.length}`,
        ],
        body,
        answer: /^HTTP\/1\.1 403 /,
      });
    } finally {
      await close();
    }
  });
});
