import { NativeConnection, Worker } from '@temporalio/worker';
import * as activities from './bare-activities.js';

/**
 * The worker for bench/bare-workflows.ts, in its own process like ours, from a workflow bundle
 * made ahead (BARE_WORKFLOW_BUNDLE) as ours is. It imports nothing of src/, so that it runs as
 * compiled JavaScript too (BENCH_RUNTIME=build: see startBareWorker), and reports ready as ours do.
 */
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
const taskQueue = process.env.TASK_QUEUE ?? 'bare';
const workers = [
  await Worker.create({
    connection,
    taskQueue,
    workflowBundle: { codePath: process.env.BARE_WORKFLOW_BUNDLE! },
    activities,
  }),
  // Parked waits get a queue and a slot budget of their own, as ours do (bench:admit gives both 5,000).
  await Worker.create({
    connection,
    taskQueue: `${taskQueue}.waits`,
    activities,
    maxConcurrentActivityTaskExecutions: 5000,
  }),
];
const running = Promise.all(workers.map((worker) => worker.run()));
process.send?.('ready');
await running;
