import { readFile } from 'node:fs/promises';
import { createGenerations, percentile, printColumns, rssKb } from './support.js';
import { startStack } from './stack.js';

/**
 * npm run bench:wait — BENCH_WAITERS (1,000) concurrent `Prefer: wait=60` requests held on one API
 * process: its RSS growth and CPU while they wait, and how long after a generation's row turns
 * terminal its waiters are answered (target p50 ≤ 50 ms). Then a batch of the same generations
 * followed by clients polling every 2 s: requests per finished generation and lateness, both ways.
 * The machine is shared: read CPU beside latency.
 */
const waiterCount = Number(process.env.BENCH_WAITERS ?? 1000);
const generationCount = Number(process.env.BENCH_GENERATIONS ?? 50);
const slowSeconds = Number(process.env.BENCH_SLOW_SECONDS ?? 10);
const stack = await startStack({ PROVIDER_POLL_INTERVAL_MS: '200' });
const auth = { authorization: `Bearer ${stack.key}` };

/** Resident memory (kB) and CPU time so far (ms) of the API process. */
async function apiProcess(): Promise<{ rssKb: number; cpuMs: number }> {
  const fields = (await readFile(`/proc/${stack.apiPid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return {
    rssKb: await rssKb(stack.apiPid),
    cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / 100,
  };
}

/** The batch, finishing over a few seconds, as independent clients' generations do, not all in one instant. */
const createBatch = (label: string) =>
  createGenerations(stack, label, generationCount, (i) => ({
    model: 'lumen-lite',
    prompt: `${label} ${i} [sim:slow=${slowSeconds + (i * 4) / generationCount}]`,
  }));

type Generation = { status: string; completed_at: string | null };
const get = async (id: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${stack.apiUrl}/generations/${id}`, { headers: { ...auth, ...headers } });
  const body = (await response.json()) as Generation;
  if (response.status !== 200) throw new Error(`GET ${id}: ${response.status} ${JSON.stringify(body)}`);
  return { body, at: Date.now() };
};
const lateness = (at: number, body: Generation) => at - Date.parse(body.completed_at!);

try {
  // Warm the API up (JIT, pools, one wait), so the figures are the waiters'.
  await get((await createBatch('warm-up'))[0]!, { prefer: 'wait=30' });
  await new Promise((r) => setTimeout(r, 1000));

  // 1. Waiters.
  const waited = await createBatch('waited');
  const idle = await apiProcess();
  const waiting = Array.from({ length: waiterCount }, (_, i) =>
    get(waited[i % waited.length]!, { prefer: 'wait=60' }),
  );
  await new Promise((r) => setTimeout(r, 2000)); // all registered
  const held = await apiProcess();
  await new Promise((r) => setTimeout(r, 3000));
  const stillHeld = await apiProcess();
  const answers = await Promise.all(waiting);
  const after = await apiProcess();
  const waitLate = answers.map(({ body, at }) => {
    if (body.status !== 'succeeded') throw new Error(`a waiter got ${JSON.stringify(body)}`);
    return lateness(at, body);
  });

  // 2. The same kind of generations, each followed by one client polling every 2 s.
  const polled = await createBatch('polled');
  let polls = 0;
  const pollLate = await Promise.all(
    polled.map(async (id) => {
      for (;;) {
        polls++;
        const { body, at } = await get(id);
        if (body.status !== 'queued') return lateness(at, body);
        await new Promise((r) => setTimeout(r, 2000));
      }
    }),
  );

  console.log(
    `\n${waiterCount} waiters on ${waited.length} generations of ${slowSeconds} to ${slowSeconds + 4} s, one API process (shared, loaded machine)\n`,
  );
  printColumns(44, [
    ['API process', 'value'],
    ['RSS before the waiters (MB)', (idle.rssKb / 1024).toFixed(1)],
    ['RSS with the waiters held (MB)', (held.rssKb / 1024).toFixed(1)],
    ['RSS growth per waiter (kB)', ((held.rssKb - idle.rssKb) / waiterCount).toFixed(1)],
    ['CPU to accept them (ms, 2 s)', (held.cpuMs - idle.cpuMs).toFixed(0)],
    ['CPU while held (ms over 3 s)', (stillHeld.cpuMs - held.cpuMs).toFixed(0)],
    ['CPU to answer them (ms)', (after.cpuMs - stillHeld.cpuMs).toFixed(0)],
  ]);
  console.log('');
  printColumns(44, [
    // completed_at is the terminal write's transaction time (now()), so this includes its commit.
    ['terminal row → answer (ms)', 'p50', 'p99', 'max', 'req/gen'],
    [
      `Prefer: wait=60 (${waiterCount} waiters)`,
      percentile(waitLate, 50).toFixed(0),
      percentile(waitLate, 99).toFixed(0),
      Math.max(...waitLate).toFixed(0),
      '1.00',
    ],
    [
      `poll every 2 s (${polled.length} clients)`,
      percentile(pollLate, 50).toFixed(0),
      percentile(pollLate, 99).toFixed(0),
      Math.max(...pollLate).toFixed(0),
      (polls / polled.length).toFixed(2),
    ],
  ]);
  console.log(
    `\ntarget: waiter p50 ≤ 50 ms   (a wait of ≤ 60 s covers a ${slowSeconds} s generation in one request)`,
  );
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await stack.stop();
}
