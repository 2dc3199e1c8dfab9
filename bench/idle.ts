import { readFile } from 'node:fs/promises';
import { sql } from 'slonik';
import { z } from 'zod';
import { randomBase62 } from '../src/ids.js';
import { startStack } from './stack.js';

/**
 * npm run bench:idle — the cost of generations at rest: creates succeeded
 * generations (simulated provider, no delay) until 1,000 and then 10,000 are
 * parked on their 30-day expiry timers, and prints the worker's resident
 * memory at each mark. Targets: ≤ 400 MB at 10,000, and RSS(10,000) /
 * RSS(1,000) ≤ 1.5. BENCH_IDLE_TOTAL (default 10000), BENCH_CLIENTS (default 16).
 */
const total = Number(process.env.BENCH_IDLE_TOTAL ?? 10_000);
const clients = Number(process.env.BENCH_CLIENTS ?? 16);
const marks = [Math.min(1_000, total), total];
const stack = await startStack({ SIM_PROVIDER_DELAY_MS: '0', PROVIDER_POLL_INTERVAL_MS: '50' });
const headers = { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' };
const rssMb = async () =>
  Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${stack.workerPid}/status`, 'utf8'))?.[1]) / 1024;
const succeeded = () =>
  stack.pool.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`SELECT count(*)::int AS n FROM generations WHERE status = 'succeeded'`,
  );
const started = Date.now();
try {
  console.log(`worker RSS at start: ${(await rssMb()).toFixed(0)} MB`);
  let created = 0;
  const results: Array<{ parked: number; rss: number }> = [];
  for (const mark of marks) {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (created < mark) {
          created++;
          const response = await fetch(`${stack.apiUrl}/generations`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ model: 'prism-2', prompt: `parked ${randomBase62(8)}`, resolution: '1K' }),
          });
          if (response.status !== 202) throw new Error(`status ${response.status}`);
          await response.arrayBuffer();
        }
      }),
    );
    while ((await succeeded()) < mark) await new Promise((r) => setTimeout(r, 1000));
    await new Promise((r) => setTimeout(r, 5000)); // let the worker settle after its last tasks
    const rss = await rssMb();
    results.push({ parked: mark, rss });
    console.log(
      `${mark} generations parked on expiry timers after ${((Date.now() - started) / 1000).toFixed(0)} s: worker RSS ${rss.toFixed(0)} MB`,
    );
  }
  const [first, last] = [results[0]!, results.at(-1)!];
  console.log(
    `\nRSS at ${last.parked}: ${last.rss.toFixed(0)} MB (target ≤ 400); ratio ${last.parked}/${first.parked}: ${(last.rss / first.rss).toFixed(2)} (target ≤ 1.5)`,
  );
  console.log(
    `(WORKER_MAX_CACHED_WORKFLOWS=${stack.env.WORKER_MAX_CACHED_WORKFLOWS ?? '100 (default)'}: parked generations live in Temporal's history, not in the worker)`,
  );
} finally {
  await stack.stop();
}
