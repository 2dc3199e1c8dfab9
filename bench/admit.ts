import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import { setKeyRules } from '../src/db/key-limits.js';
import { createFundedAccount } from '../src/dev/funded-account.js';
import { randomBase62 } from '../src/vocabulary/ids.js';
import {
  alternatingRounds,
  closedLoop,
  closedLoopSettings,
  benchRuntime,
  printComparison,
  printCpu,
  printRounds,
  startBareWorker,
  startStack,
} from './stack.js';
import { loadAverage, printTargets } from './targets.js';

/**
 * npm run bench:admit — POST /v1/generations → 202 (auth, validation,
 * update-with-start, admission with its debit, the handover to the provider,
 * the record read back) at 20 concurrent clients, against admission's shape
 * with no-op steps (the update answered after two local activities, then a
 * wait parked on its own queue): what Temporal and the SDK alone cost for the
 * steps the spec asks of every POST, with no API, database or provider.
 * Targets (issue 28's): throughput ≥ 0.70 × the shape's, p50 ≤ 1.4 × the shape's, worker + Temporal
 * CPU per POST ≤ 1.25 × the shape's (bare worker + Temporal), all our processes' CPU per POST (API +
 * worker + Temporal + PostgreSQL) ≤ 1.5 × the shape's worker + Temporal; and API ≤ 3 ms and
 * PostgreSQL ≤ 3 ms of CPU per POST: every run prints them. CPU is counted for the PIDs this bench started and their
 * children only (other people's servers on the machine are not). Admitted
 * generations park at the provider (a long simulated delay), so the figures
 * are admission's. A bare update-with-start of an empty workflow on the same
 * Temporal server is printed for reference, and the same POST by a key held to a spend limit and a
 * list of models (issue 46: within 5 % of the unlimited key's throughput). BENCH_SECONDS (default 30 per loop,
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
  // A second account whose key is held to every rule a key can carry (issue 46): a daily spend limit
  // (far above what the run spends, so every POST is admitted), a list of models, full access.
  const limited = await createFundedAccount(stack.pool, {
    email: `bench-limited-${randomBase62(6)}@example.test`,
    oneTime: 1_000_000_000,
    reason: 'bench',
  });
  await setKeyRules(stack.pool, limited.keyId, {
    spend_limit: 1_000_000_000,
    limit_reset: 'daily',
    models: ['lumen-lite', 'lumen-pro'],
  });
  const post = (key: string) => async () => {
    const response = await fetch(`${stack.apiUrl}/generations`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'idempotency-key': randomBase62(24),
      },
      body: JSON.stringify({ model: 'lumen-lite', prompt: `benchmark ${randomBase62(8)}` }),
    });
    if (response.status !== 202) throw new Error(`status ${response.status}`);
    await response.arrayBuffer();
  };
  const ours = post(stack.key);
  const oursLimited = post(limited.key);
  await closedLoop(clients, 3, barecall); // warm-up
  await closedLoop(clients, 3, shape);
  await closedLoop(clients, 3, ours);
  await closedLoop(clients, 3, oursLimited);
  const processes = {
    ...stack.processes,
    'bare worker': { pid: bare.pid },
    'load generator': { pid: process.pid, own: true },
  };
  const loadBefore = await loadAverage();
  const results = await alternatingRounds(
    { rounds, seconds: seconds / rounds, clients, processes },
    { bare: barecall, shape, ours, oursLimited },
  );
  printComparison(
    `${clients} concurrent clients, ${seconds} s each in ${rounds} alternating rounds, one machine (2 cores) for clients, API, worker, Temporal dev server and PostgreSQL`,
    [
      { label: 'bare update-with-start (empty workflow)', ...results.bare },
      { label: 'admission shape, no-op steps', ...results.shape },
      { label: 'POST /v1/generations → 202', ...results.ours },
      { label: 'the same, its key limited (spend limit, models)', ...results.oursLimited },
    ],
  );
  printCpu('CPU ms per call, by process:', [
    ['bare', results.bare.cpu],
    ['shape', results.shape.cpu],
    ['ours', results.ours.cpu],
    ['ours, key limited', results.oursLimited.cpu],
  ]);
  printRounds([
    ['bare', results.bare.rounds],
    ['shape', results.shape.rounds],
    ['ours', results.ours.rounds],
    ['ours, key limited', results.oursLimited.rounds],
  ]);
  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  const { ours: o, shape: sh } = results;
  const oursWt = o.cpu.worker! + o.cpu.temporal!;
  const shapeWt = sh.cpu['bare worker']! + sh.cpu.temporal!;
  const oursAll = o.cpu.api! + oursWt + o.cpu.postgres!;
  printTargets(`targets (${benchRuntime === 'build' ? 'build: dist/ on node' : 'tsx: src/'}):`, [
    {
      label: 'throughput, ours / no-op shape',
      value: o.perSecond / sh.perSecond,
      kind: 'min',
      target: 0.7,
      unit: 'ratio',
      detail: `${o.perSecond.toFixed(1)} / ${sh.perSecond.toFixed(1)} per s`,
    },
    {
      label: 'p50, ours / no-op shape',
      value: o.p50 / sh.p50,
      kind: 'max',
      target: 1.4,
      unit: 'ratio',
      detail: `${o.p50.toFixed(1)} / ${sh.p50.toFixed(1)} ms`,
    },
    {
      label: 'worker + Temporal CPU per POST, ours / shape',
      value: oursWt / shapeWt,
      kind: 'max',
      target: 1.25,
      unit: 'ratio',
      detail: `ours ${o.cpu.worker!.toFixed(1)} + ${o.cpu.temporal!.toFixed(1)} = ${oursWt.toFixed(1)} ms; shape ${sh.cpu['bare worker']!.toFixed(1)} + ${sh.cpu.temporal!.toFixed(1)} = ${shapeWt.toFixed(1)} ms; budget ${(1.25 * shapeWt).toFixed(1)} ms`,
    },
    {
      label: "all processes' CPU per POST (API + worker + Temporal + PostgreSQL) / shape's worker + Temporal",
      value: oursAll / shapeWt,
      kind: 'max',
      target: 1.5,
      unit: 'ratio',
      detail: `ours ${o.cpu.api!.toFixed(1)} + ${o.cpu.worker!.toFixed(1)} + ${o.cpu.temporal!.toFixed(1)} + ${o.cpu.postgres!.toFixed(1)} = ${oursAll.toFixed(1)} ms; budget ${(1.5 * shapeWt).toFixed(1)} ms`,
    },
    {
      label: 'throughput, key limited / not limited (issue 46)',
      value: results.oursLimited.perSecond / o.perSecond,
      kind: 'min',
      target: 0.95,
      unit: 'ratio',
      detail: `${results.oursLimited.perSecond.toFixed(1)} / ${o.perSecond.toFixed(1)} per s; PostgreSQL CPU per POST ${results.oursLimited.cpu.postgres!.toFixed(2)} / ${o.cpu.postgres!.toFixed(2)} ms`,
    },
    { label: 'API CPU per POST', value: o.cpu.api!, kind: 'max', target: 3, unit: 'ms' },
    { label: 'PostgreSQL CPU per POST', value: o.cpu.postgres!, kind: 'max', target: 3, unit: 'ms' },
  ]);
  console.log(
    `for reference: no-op shape / bare ${ratio(sh.perSecond, results.bare.perSecond)} (p50 ${ratio(sh.p50, results.bare.p50)}), ours / bare ${ratio(o.perSecond, results.bare.perSecond)} (p50 ${ratio(o.p50, results.bare.p50)})`,
  );
  console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);
} finally {
  await connection.close();
  await bare.stop();
  await stack.stop();
}
