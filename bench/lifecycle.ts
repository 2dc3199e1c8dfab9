import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
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
 * npm run bench:lifecycle — whole generations (simulated provider with no
 * delay): POST, then poll every 50 ms until succeeded is visible (the customer's result stored: the
 * gallery's thumbnail is made by the thumbnails schedule's sweep, on its own task queue, by a worker
 * process of its own here, whose CPU is printed apart and not counted). Against the
 * same shape with no-op steps on the same server: update-with-start answered
 * after two local activities, then two activities, waiting for the result. Reports
 * lifecycles per second and POST → succeeded-visible p50. Targets: ≥ 0.5 × the
 * ceiling's lifecycles per second, and the CPU per lifecycle of API + worker + Temporal +
 * PostgreSQL (the simulated provider's rendering excluded: that is the provider's work) ≤ 1.8 ×
 * the ceiling's worker + Temporal (issue 28's target); every run prints both. CPU is counted for the PIDs this bench
 * started and their children only. BENCH_SECONDS (default 30, split over the rounds), BENCH_ROUNDS
 * (default 3), BENCH_CLIENTS (default 20).
 */
const { seconds, clients, rounds } = closedLoopSettings();
// The gallery's thumbnails, made by a sweep on their own task queue, by a worker of their own:
// their CPU is printed apart, not the generation's (the customer's result is the image).
const stack = await startStack(
  { SIM_PROVIDER_DELAY_MS: '0', PROVIDER_POLL_INTERVAL_MS: '50' },
  { thumbnailWorker: true },
);
const bare = await startBareWorker(stack.temporalAddress, 'bare-lifecycle');
const connection = await Connection.connect({ address: stack.temporalAddress });
const client = new Client({ connection });
const headers = { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' };
try {
  const bareLifecycle = async () => {
    const workflowId = `bare-${randomBase62(16)}`;
    await client.workflow.executeUpdateWithStart('admit', {
      startWorkflowOperation: new WithStartWorkflowOperation('noopLifecycleWorkflow', {
        workflowId,
        taskQueue: 'bare-lifecycle',
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
    await client.workflow.getHandle(workflowId).result();
  };
  const ourLifecycle = async () => {
    const created = await fetch(`${stack.apiUrl}/generations`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'prism-2', prompt: `lifecycle ${randomBase62(8)}`, resolution: '1K' }),
    });
    if (created.status !== 202) throw new Error(`status ${created.status}`);
    const { id } = (await created.json()) as { id: string };
    for (;;) {
      const { status } = (await (await fetch(`${stack.apiUrl}/generations/${id}`, { headers })).json()) as {
        status: string;
      };
      if (status === 'succeeded') return;
      if (status !== 'queued') throw new Error(status);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await closedLoop(clients, 3, bareLifecycle);
  await closedLoop(clients, 3, ourLifecycle);
  const loadBefore = await loadAverage();
  const processes = { ...stack.processes, 'bare worker': { pid: bare.pid } };
  const { ceiling: bareResult, ours: oursResult } = await alternatingRounds(
    { rounds, seconds: seconds / rounds, clients, processes },
    { ceiling: bareLifecycle, ours: ourLifecycle },
  );
  printComparison(
    `${clients} concurrent clients, ${seconds} s each in ${rounds} alternating rounds; latency is POST → succeeded visible`,
    [
      { label: 'ceiling: update-with-start, 2 local + 2 no-op activities', ...bareResult },
      { label: 'generation lifecycle (1K PNG rendered, stored)', ...oursResult },
    ],
  );
  printCpu('CPU ms per lifecycle, by process:', [
    ['ceiling', bareResult.cpu],
    ['ours', oursResult.cpu],
  ]);
  printRounds([
    ['ceiling', bareResult.rounds],
    ['ours', oursResult.rounds],
  ]);
  const ours = oursResult.cpu;
  const oursSum = ours.api! + ours.worker! + ours.temporal! + ours.postgres!;
  const ceilingSum = bareResult.cpu['bare worker']! + bareResult.cpu.temporal!;
  printTargets(`targets (${benchRuntime === 'build' ? 'build: dist/ on node' : 'tsx: src/'}):`, [
    {
      label: 'lifecycles per second, ours / ceiling',
      value: oursResult.perSecond / bareResult.perSecond,
      kind: 'min',
      target: 0.5,
      unit: 'ratio',
      detail: `${oursResult.perSecond.toFixed(1)} / ${bareResult.perSecond.toFixed(1)} per s`,
    },
    {
      label: "CPU per lifecycle, ours (API + worker + Temporal + PostgreSQL) / ceiling's worker + Temporal",
      value: oursSum / ceilingSum,
      kind: 'max',
      target: 1.8,
      unit: 'ratio',
      detail: `ours ${ours.api!.toFixed(1)} + ${ours.worker!.toFixed(1)} + ${ours.temporal!.toFixed(1)} + ${ours.postgres!.toFixed(1)} = ${oursSum.toFixed(1)} ms; ceiling ${bareResult.cpu['bare worker']!.toFixed(1)} + ${bareResult.cpu.temporal!.toFixed(1)} = ${ceilingSum.toFixed(1)} ms; budget ${(1.8 * ceilingSum).toFixed(1)} ms; not counted: sim renderer ${ours['sim renderer']!.toFixed(1)} ms, gallery thumbnails ${ours.thumbnails!.toFixed(1)} ms (with them ${((oursSum + ours.thumbnails!) / ceilingSum).toFixed(2)}×)`,
    },
  ]);
  console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);
} finally {
  await connection.close();
  await bare.stop();
  await stack.stop();
}
