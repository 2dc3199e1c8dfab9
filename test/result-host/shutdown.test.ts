import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'vitest';
import { createLogger } from '../../src/process/logger.js';
import { buildResultHost } from '../../src/result-host/server.js';
import { expectPromptShutdown } from '../support/shutdown.js';

describe('stopping the result host', () => {
  it('closes at once a connection that never sent a request, and one once its request in flight is answered', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'result-host-'));
    const host = await buildResultHost({ storageDir: dir, logger: createLogger('results-test', 'silent') });
    try {
      await host.listen({ host: '127.0.0.1', port: 0 });
      const body = '{"a download":"never has a body"}';
      await expectPromptShutdown({
        server: host.server,
        port: (host.server.address() as AddressInfo).port,
        close: () => host.close(),
        // The host serves GETs only; a body still arriving keeps this one in flight.
        head: [
          'POST /nothing-here HTTP/1.1',
          'Host: 127.0.0.1',
          'Content-Type: application/json',
          `Content-Length: ${body.length}`,
        ],
        body,
        answer: /^HTTP\/1\.1 404 /,
      });
    } finally {
      await host.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
