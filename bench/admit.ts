import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import { randomBase62 } from '../src/ids.js';
import {
  alternatingRounds,
  closedLoop,
  closedLoopSettings,
  printComparison,
  printCpu,
  printRounds,
  stackProcesses,
  startBareWorker,
  startStack,
} from './stack.js';

/**
 * npm run bench:admit — POST /v1/generations → 202 (auth, validation,
 * update-with-start, admission with its debit, the handover to the provider,
 * the record read back) at 20 concurrent clients, against admission's shape
 * with no-op steps (the update answered after two local activities, then a
 * wait parked on its own queue): what Temporal and the SDK alone cost for the
 * steps the spec asks of every POST, with no API, database or provider.
 * Targets: throughput ≥ 0.85 × the shape's, p50 ≤ 1.3 × the shape's. Admitted
 * generations park at the provider (a long simulated delay), so the figures
 * are admission's. A bare update-with-start of an empty workflow on the same
 * Temporal server is printed for reference. BENCH_SECONDS (default 30 per loop,
 * split over the rounds), BENCH_ROUNDS (default 3), BENCH_CLIENTS (default 20).
 */
const { seconds, clients, rounds } = closedLoopSettings();
const stack = await startStack({
  SIM_PROVIDER_DELAY_MS: String(3_600_000),
  PROVIDER_POLL_INTERVAL_MS: '60000',
  // Every wait admitted during the run is dispatched and parked, here as in the no-op shape.
  WORKER_MAX_PROVIDER_WAITS: '5000',
});
const bare = await startBareWorker(stack.temporalAddress, 'bare-admit');
const connection = await Connection.connect({ address: stack.temporalAddress });
const client = new Client({ connection });
try {
  const updateWithStart = (workflowType: string) => () =>
    client.workflow.executeUpdateWithStart('admit', {
      startWorkflowOperation: new WithStartWorkflowOperation(workflowType, {
        workflowId: `bare-${randomBase62(16)}`,
        taskQueue: 'bare-admit',
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
  const barecall = updateWithStart('emptyWorkflow');
  const shape = updateWithStart('noopAdmissionWorkflow');
  const ours = async () => {
    const response = await fetch(`${stack.apiUrl}/generations`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.key}`,
        'content-type': 'application/json',
        'idempotency-key': randomBase62(24),
      },
      body: JSON.stringify({ model: 'lumen-lite', prompt: `benchmark ${randomBase62(8)}` }),
    });
    if (response.status !== 202) throw new Error(`status ${response.status}`);
    await response.arrayBuffer();
  };
  await closedLoop(clients, 3, barecall); // warm-up
  await closedLoop(clients, 3, shape);
  await closedLoop(clients, 3, ours);
  const processes = { ...stackProcesses, 'load generator': 'bench/admit.ts' };
  const results = await alternatingRounds(
    { rounds, seconds: seconds / rounds, clients, processes },
    { bare: barecall, shape, ours },
  );
  printComparison(
    `${clients} concurrent clients, ${seconds} s each in ${rounds} alternating rounds, one machine (2 cores) for clients, API, worker, Temporal dev server and PostgreSQL`,
    [
      { label: 'bare update-with-start (empty workflow)', ...results.bare },
      { label: 'admission shape, no-op steps', ...results.shape },
      { label: 'POST /v1/generations → 202', ...results.ours },
    ],
  );
  printCpu('CPU ms per call, by process:', [
    ['bare', results.bare.cpu],
    ['shape', results.shape.cpu],
    ['ours', results.ours.cpu],
  ]);
  printRounds([
    ['bare', results.bare.rounds],
    ['shape', results.shape.rounds],
    ['ours', results.ours.rounds],
  ]);
  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  console.log(
    `\nours / no-op shape: throughput ${ratio(results.ours.perSecond, results.shape.perSecond)} (target ≥ 0.85), p50 ${ratio(results.ours.p50, results.shape.p50)} (target ≤ 1.30)`,
  );
  console.log(
    `for reference: no-op shape / bare ${ratio(results.shape.perSecond, results.bare.perSecond)} (p50 ${ratio(results.shape.p50, results.bare.p50)}), ours / bare ${ratio(results.ours.perSecond, results.bare.perSecond)} (p50 ${ratio(results.ours.p50, results.bare.p50)})`,
  );
} finally {
  await connection.close();
  await bare.stop();
  await stack.stop();
}
