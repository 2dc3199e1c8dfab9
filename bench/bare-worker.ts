import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker } from '@temporalio/worker';
import { reportReady } from '../src/process.js';
import * as activities from './bare-activities.js';

/** The worker for bench/bare-workflows.ts, in its own process like ours. Reports ready as ours do. */
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
const taskQueue = process.env.TASK_QUEUE ?? 'bare';
const workers = [
  await Worker.create({
    connection,
    taskQueue,
    workflowsPath: fileURLToPath(new URL('./bare-workflows.ts', import.meta.url)),
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
reportReady();
await running;
