import Fastify from 'fastify';
import { freePort } from '../src/dev/free-port.js';
import { cpuBySource } from './process-cpu.js';
import { load, printTable } from './support.js';
import { startStack } from './stack.js';

/**
 * npm run bench:poll — GET /v1/generations/{id} of existing generations at
 * 256 connections, against a bare Fastify route answering a generation-sized
 * body, on the same machine. Target ≥ 0.6 × bare. The poll path never calls
 * Temporal: it reads the projection through a cache that NOTIFY invalidates.
 */
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 256);
const stack = await startStack({ SIM_PROVIDER_DELAY_MS: '0', PROVIDER_POLL_INTERVAL_MS: '50' });
const bare = Fastify({ logger: false });
try {
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const response = await fetch(`${stack.apiUrl}/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lumen-lite', prompt: `poll me ${i}` }),
    });
    ids.push(((await response.json()) as { id: string }).id);
  }
  let sample = '';
  for (const id of ids) {
    for (;;) {
      const body = await (
        await fetch(`${stack.apiUrl}/generations/${id}`, {
          headers: { authorization: `Bearer ${stack.key}` },
        })
      ).text();
      if (!body.includes('"queued"')) {
        sample = body;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const barePort = await freePort();
  const payload = JSON.parse(sample) as unknown;
  bare.get('/bare/:id', () => payload);
  await bare.listen({ host: '127.0.0.1', port: barePort });

  const apiBase = new URL(stack.apiUrl);
  const requests = ids.map((id) => ({
    method: 'GET' as const,
    path: `${apiBase.pathname}/generations/${id}`,
  }));
  const common = { connections, duration: seconds };
  await load('warm-up', { ...common, duration: 2, url: `http://127.0.0.1:${barePort}/bare/x` });
  const bareResult = await load('bare Fastify route (same body)', {
    ...common,
    url: `http://127.0.0.1:${barePort}/bare/x`,
  });
  await load('warm-up', {
    ...common,
    duration: 2,
    url: apiBase.origin,
    headers: { authorization: `Bearer ${stack.key}` },
    requests,
  });
  const { api: api0, postgres: pg0, temporal: temporal0 } = await cpuBySource(stack.processes);
  const ours = await load('GET /v1/generations/{id}', {
    ...common,
    url: apiBase.origin,
    headers: { authorization: `Bearer ${stack.key}` },
    requests,
  });
  await new Promise((r) => setTimeout(r, 1500));
  const { api: api1, postgres: pg1, temporal: temporal1 } = await cpuBySource(stack.processes);
  console.log(
    `\n${connections} connections, ${seconds} s each, loopback, ${ids.length} succeeded generations polled in turn\n`,
  );
  printTable([bareResult, ours]);
  console.log(
    `\nper poll: API ${(((api1 - api0) * 1000) / ours.requests).toFixed(1)} µs CPU, PostgreSQL ${(((pg1 - pg0) * 1000) / ours.requests).toFixed(1)} µs (request log), Temporal ${(((temporal1 - temporal0) * 1000) / ours.requests).toFixed(1)} µs`,
  );
  console.log(
    `ratio (ours / bare): ${(ours.requestsPerSecond / bareResult.requestsPerSecond).toFixed(2)}   target ≥ 0.60`,
  );
} finally {
  await bare.close();
  await stack.stop();
}
