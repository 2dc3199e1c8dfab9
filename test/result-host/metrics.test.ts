import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { metricNames } from '../../src/observability/metrics.js';
import { scrape } from '../support/prometheus.js';

/** `npm run result-host` with RESULT_METRICS_PORT: downloads timed by route pattern, never by token. */
describe('metrics of the result host', () => {
  let dir: string;
  let child: ChildProcess;
  let origin: string;
  let metrics: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'result-metrics-'));
    await mkdir(path.join(dir, 'rToken123'));
    await writeFile(path.join(dir, 'rToken123', 'output-0.png'), 'not really a png');
    const [port, metricsPort] = [await freePort(), await freePort()];
    origin = `http://127.0.0.1:${port}`;
    metrics = `http://127.0.0.1:${metricsPort}`;
    child = spawn(process.execPath, ['--import', 'tsx', 'src/result-host/main.ts'], {
      env: {
        ...process.env,
        // Required by the shared configuration; the result host reaches neither.
        DATABASE_URL: 'postgres://unused@127.0.0.1:9/unused',
        TEMPORAL_ADDRESS: '127.0.0.1:9',
        STORAGE_DIR: dir,
        RESULT_PORT: String(port),
        RESULT_METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`result host exited ${code}`)));
    });
  });
  afterAll(async () => {
    child?.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  it('counts downloads by route pattern, and misses as unmatched', async () => {
    expect((await fetch(`${origin}/rToken123/output-0.png`)).status).toBe(200);
    expect((await fetch(`${origin}/rToken123/output-1.png`)).status).toBe(404);
    const scraped = await scrape(metrics);
    const count = `${metricNames.httpRequestDuration}_count`;
    expect(scraped.value(count, { route: '/*', method: 'GET', status: '200' })).toBe(1);
    // A result that is not there (expired, or never was) is answered as no route: `unmatched`.
    expect(scraped.value(count, { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    for (const sample of scraped.samples) expect(JSON.stringify(sample.labels)).not.toContain('rToken123');
    expect((await fetch(`${metrics}/rToken123/output-0.png`)).status).toBe(404);
  });
});
