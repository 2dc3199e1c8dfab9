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
 * update-with-start, admission with its debit, the record read back) at 20
 * concurrent clients, against a bare update-with-start of an empty workflow on
 * the same Temporal server. Targets: throughput ≥ 0.7 × bare, p50 ≤ 1.5 × bare.
 * Admitted generations park at the provider (a long simulated delay), so the
 * figures are admission's. BENCH_SECONDS (default 30, split over the rounds),
 * BENCH_ROUNDS (default 3), BENCH_CLIENTS (default 20).
 */
const { seconds, clients, rounds } = closedLoopSettings();
const stack = await startStack({
  SIM_PROVIDER_DELAY_MS: String(3_600_000),
  PROVIDER_POLL_INTERVAL_MS: '60000',
});
const bare = await startBareWorker(stack.temporalAddress, 'bare-admit');
const connection = await Connection.connect({ address: stack.temporalAddress });
const client = new Client({ connection });
try {
  const barecall = () =>
    client.workflow.executeUpdateWithStart('admit', {
      startWorkflowOperation: new WithStartWorkflowOperation('emptyWorkflow', {
        workflowId: `bare-${randomBase62(16)}`,
        taskQueue: 'bare-admit',
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
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
  await closedLoop(clients, 3, ours);
  const processes = { ...stackProcesses, 'load generator': 'bench/admit.ts' };
  const { a: bareResult, b: oursResult } = await alternatingRounds(
    { rounds, seconds: seconds / rounds, clients, processes },
    { a: barecall, b: ours },
  );
  printComparison(
    `${clients} concurrent clients, ${seconds} s each in ${rounds} alternating rounds, one machine (2 cores) for clients, API, worker, Temporal dev server and PostgreSQL`,
    [
      { label: 'bare update-with-start (empty workflow)', ...bareResult },
      { label: 'POST /v1/generations → 202', ...oursResult },
    ],
  );
  printCpu('CPU ms per call, by process:', [
    ['bare', bareResult.cpu],
    ['ours', oursResult.cpu],
  ]);
  printRounds(bareResult.rounds, oursResult.rounds);
  console.log(
    `\nthroughput ratio ${(oursResult.perSecond / bareResult.perSecond).toFixed(2)} (target ≥ 0.70); p50 ratio ${(oursResult.p50 / bareResult.p50).toFixed(2)} (target ≤ 1.50)`,
  );
} finally {
  await connection.close();
  await bare.stop();
  await stack.stop();
}
