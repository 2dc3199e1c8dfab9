import { readFileSync } from 'node:fs';
import { sql } from 'slonik';
import { z } from 'zod';
import {
  batchBenchArgs,
  benchAccount,
  benchLine,
  countsLine,
  getBatch,
  postJsonlBatch,
  waitForBatch,
  type BatchView,
} from './batch-support.js';
import { startStack, type Stack } from './stack.js';
import { percentile } from './support.js';
import { loadAverage, printTargets } from './targets.js';

/**
 * npm run bench:fairness [-- --lines N] — batch lines behind interactive work, measured. The
 * simulator as a provider with 10 in-flight places (SIM_PROVIDER_MAX_IN_FLIGHT=10, each job
 * BENCH_SIM_DELAY_MS, default 500 ms; BATCH_PROVIDER_SHARE and BATCH_LINES_IN_FLIGHT as the
 * service's defaults unless the environment sets them). First, on the idle service, account B
 * sends BENCH_INTERACTIVE (50) single generations, one every BENCH_INTERACTIVE_EVERY_MS (500 ms).
 * Then account A starts an N-line batch (default 5,000); once its lines hold their share of the
 * places, B sends the same generations again while account C runs a 50-line batch. Time to start
 * is from a generation's creation (its row, written at admission) to its `generation.processing`
 * event (the provider accepted the job: it holds a place and has a job id), as both are recorded
 * in PostgreSQL. Prints p50 and p90 idle and busy and their ratio (target ≤ 1.2 at p50), both
 * batches' progress when C's has finished (target: A still running), and the most places each
 * lane held. A's batch is then canceled: the bench does not wait for its 5,000 lines.
 */
const { lines } = batchBenchArgs(5_000);
const places = 10;
const simDelayMs = Number(process.env.BENCH_SIM_DELAY_MS ?? 3_000);
const interactive = Number(process.env.BENCH_INTERACTIVE ?? 50);
const everyMs = Number(process.env.BENCH_INTERACTIVE_EVERY_MS ?? 2_000);
const secondBatchLines = 50;

const loadNow = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const startRow = z.object({ id: z.string(), ms: z.number().nullable() });
const laneRow = z.object({ batch: z.number(), interactive: z.number() });

const stack = await startStack({
  SIM_PROVIDER_DELAY_MS: String(simDelayMs),
  SIM_PROVIDER_MAX_IN_FLIGHT: String(places),
  PROVIDER_POLL_INTERVAL_MS: '100',
  // Each submit that finds the places taken is logged as a failed activity attempt (at warn):
  // thousands of them here, by design. Errors still show.
  LOG_LEVEL: 'error',
});
const loadBefore = await loadAverage();
console.log(
  `bench:fairness: ${places} places (simulator, ${simDelayMs} ms a job); ${interactive} interactive generations one every ${everyMs} ms; ` +
    `batch of ${lines} lines, second batch of ${secondBatchLines}; BATCH_PROVIDER_SHARE ${process.env.BATCH_PROVIDER_SHARE ?? '(default)'}, ` +
    `BATCH_LINES_IN_FLIGHT ${process.env.BATCH_LINES_IN_FLIGHT ?? '(default)'}; load average ${loadBefore}`,
);
try {
  const [a, b, c] = await Promise.all(
    ['fair-a', 'fair-b', 'fair-c'].map((label) => benchAccount(stack.pool, label)),
  );
  // Warm-up, so the idle figures do not pay for the first compilation.
  await interactiveRun(stack, b!.key, 'warm', 5);

  const idle = await interactiveRun(stack, b!.key, 'idle', interactive);
  console.log(`idle: ${interactive} generations started (load ${loadNow()})`);

  const big = await postJsonlBatch(
    stack,
    a!.key,
    Array.from({ length: lines }, (_, i) => benchLine('a', i)),
    `fair-a-${Date.now()}`,
  );
  // The big batch holds its share of the places before the measured part starts.
  await waitForBatch(stack, a!.key, big.id, {
    until: (batch) => batch.request_counts.succeeded! >= 2 * places,
  });
  const lanes = sampleLanes(stack);
  const second = await postJsonlBatch(
    stack,
    c!.key,
    Array.from({ length: secondBatchLines }, (_, i) => benchLine('c', i)),
    `fair-c-${Date.now()}`,
  );
  let progressAtSecondEnd: { first: BatchView; second: BatchView } | undefined;
  const secondDone = waitForBatch(stack, c!.key, second.id, { intervalMs: 100 }).then(async (done) => {
    progressAtSecondEnd = { first: await getBatch(stack, a!.key, big.id), second: done };
  });
  const busy = await interactiveRun(stack, b!.key, 'busy', interactive);
  console.log(`busy: ${interactive} generations started (load ${loadNow()})`);
  await secondDone;
  const held = await lanes.stop();
  const { first, second: secondEnd } = progressAtSecondEnd!;
  const firstRunning = first.status === 'in_progress' && first.request_counts.pending! > 0;

  // A's batch is canceled (its running lines end under the generation cancel rules), and the idle
  // service measured again: the machine's load may have moved meanwhile, so busy is set against both.
  await fetch(`${stack.apiUrl}/batches/${big.id}/cancel`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a!.key}` },
  });
  const canceled = await waitForBatch(stack, a!.key, big.id);
  console.log(`A's batch canceled after the measurement: ${canceled.status} (${countsLine(canceled)})`);
  const idleAfter = await interactiveRun(stack, b!.key, 'idle-after', interactive);
  console.log(`idle again: ${interactive} generations started (load ${loadNow()})`);
  const idleP50 = (idle.p50 + idleAfter.p50) / 2;
  const idleP90 = (idle.p90 + idleAfter.p90) / 2;

  console.log(`\ntime to start (created → generation.processing), ms, ${interactive} generations each:`);
  const row = (label: string, r: TimeToStart) =>
    console.log(
      `  ${label.padEnd(24)}p50 ${r.p50.toFixed(0).padStart(5)}  p90 ${r.p90.toFixed(0).padStart(5)}  max ${r.max.toFixed(0).padStart(5)}   (load ${r.load} at its start)`,
    );
  row('idle service, before:', idle);
  row('beside the batches:', busy);
  row('idle service, after:', idleAfter);
  console.log(
    `  busy / idle (mean of before and after): p50 ${(busy.p50 / idleP50).toFixed(2)}×  p90 ${(busy.p90 / idleP90).toFixed(2)}×`,
  );
  console.log(`\nwhen the ${secondBatchLines}-line batch (account C) ended:`);
  console.log(
    `  C's batch: ${secondEnd.status} (${countsLine(secondEnd)}), ${seconds(secondEnd)} s from creation to end`,
  );
  console.log(`  A's batch: ${first.status} (${countsLine(first)}) of ${lines}`);
  console.log(
    `places held at once (sampled every 100 ms while measuring): batch lines at most ${held.batch} (share ${Math.max(1, Math.floor(places * Number(process.env.BATCH_PROVIDER_SHARE ?? 0.8)))} of ${places}), interactive at most ${held.interactive}`,
  );

  printTargets('targets:', [
    {
      label: 'interactive p50 time to start, beside the batches / idle',
      value: busy.p50 / idleP50,
      kind: 'max',
      target: 1.2,
      unit: 'ratio',
      detail: `${busy.p50.toFixed(0)} / ${idleP50.toFixed(0)} ms (idle before ${idle.p50.toFixed(0)}, after ${idleAfter.p50.toFixed(0)})`,
    },
    {
      label: `the ${secondBatchLines}-line batch ended while the ${lines}-line one runs (1 = yes)`,
      value: secondEnd.status === 'completed' && firstRunning ? 1 : 0,
      kind: 'min',
      target: 1,
      unit: 'ratio',
      detail: `C ${secondEnd.status}; A ${first.status}, ${first.request_counts.pending} lines pending`,
    },
  ]);
  console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);
} finally {
  await stack.stop();
}

function seconds(batch: BatchView): string {
  return ((Date.parse(batch.completed_at!) - Date.parse(batch.created_at)) / 1000).toFixed(1);
}

/** Times to start of one run, ms, and the load average when it began. */
interface TimeToStart {
  p50: number;
  p90: number;
  max: number;
  load: string;
}

/**
 * `n` single generations by one account, one every `everyMs` (each its own client: none waits for
 * another), then their times to start once all have one.
 */
async function interactiveRun(stack: Stack, key: string, label: string, n: number): Promise<TimeToStart> {
  const load = loadNow();
  const ids: string[] = [];
  const posts: Array<Promise<void>> = [];
  for (let i = 0; i < n; i++) {
    posts.push(
      (async () => {
        for (;;) {
          const response = await fetch(`${stack.apiUrl}/generations`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              'idempotency-key': `${label}-${i}-${Date.now()}`,
            },
            body: JSON.stringify({ model: 'prism-2', prompt: `${label} ${i}`, resolution: '1K' }),
          });
          if (response.status === 202) {
            ids.push(((await response.json()) as { id: string }).id);
            return;
          }
          await response.arrayBuffer();
          if (response.status !== 429 && response.status !== 503)
            throw new Error(`POST /v1/generations: ${response.status}`);
          await new Promise((r) => setTimeout(r, 1000 * Number(response.headers.get('retry-after') ?? 1)));
        }
      })(),
    );
    await new Promise((r) => setTimeout(r, everyMs));
  }
  await Promise.all(posts);
  for (;;) {
    const rows = await stack.pool.any(sql.type(startRow)`
      SELECT g.id, (extract(epoch FROM min(e.created_at) - g.created_at) * 1000)::float8 AS ms
      FROM generations g LEFT JOIN generation_events e ON e.generation_id = g.id AND e.type = 'generation.processing'
      WHERE g.id = ANY(${sql.array(ids, 'text')}) GROUP BY g.id`);
    const started = rows.flatMap((row) => (row.ms === null ? [] : [row.ms]));
    if (started.length === n)
      return { p50: percentile(started, 50), p90: percentile(started, 90), max: Math.max(...started), load };
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The most places each lane held at once (provider_slots of generations still queued), sampled every 100 ms. */
function sampleLanes(stack: Stack): { stop(): Promise<{ batch: number; interactive: number }> } {
  const most = { batch: 0, interactive: 0 };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const now = await stack.pool.one(sql.type(laneRow)`
        SELECT count(*) FILTER (WHERE s.lane = 'batch')::int AS batch,
               count(*) FILTER (WHERE s.lane = 'interactive')::int AS interactive
        FROM provider_slots s JOIN generations g ON g.id = s.generation_id
        WHERE g.status = 'queued' AND NOT g.needs_review`);
      most.batch = Math.max(most.batch, now.batch);
      most.interactive = Math.max(most.interactive, now.interactive);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return most;
    },
  };
}
