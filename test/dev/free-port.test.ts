import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';

describe('freePort', () => {
  it('hands out distinct ports below the kernel’s ephemeral range, where no outgoing connection takes them, each one free', async () => {
    const ephemeralStart = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    const ports: number[] = [];
    // Half of them asked for at once, as `npm start` asks for its ports.
    for (let i = 0; i < 10; i++) ports.push(await freePort());
    ports.push(...(await Promise.all(Array.from({ length: 10 }, () => freePort()))));
    expect(new Set(ports).size).toBe(20);
    // (A kernel whose range starts near 10000 leaves no room below it: port 0's answers then.)
    for (const port of ports) {
      if (ephemeralStart >= 11_000) {
        expect(port).toBeGreaterThanOrEqual(10_000);
        expect(port).toBeLessThan(ephemeralStart);
      }
      const server = createServer();
      await new Promise<void>((resolve, reject) =>
        server.once('error', reject).listen(port, '127.0.0.1', resolve),
      );
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
