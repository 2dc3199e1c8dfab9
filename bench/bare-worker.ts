import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker } from '@temporalio/worker';
import * as activities from './bare-activities.js';

/** The worker for bench/bare-workflows.ts, in its own process like ours. Prints one JSON line when running. */
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
const worker = await Worker.create({
  connection,
  taskQueue: process.env.TASK_QUEUE ?? 'bare',
  workflowsPath: fileURLToPath(new URL('./bare-workflows.ts', import.meta.url)),
  activities,
});
const running = worker.run();
console.log(JSON.stringify({ ready: true }));
await running;
