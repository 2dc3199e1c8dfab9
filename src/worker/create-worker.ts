import { NativeConnection, Worker } from '@temporalio/worker';
import type { Activities } from '../activities/index.js';
import { workflowsPath } from './workflow-bundle.js';

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests build one per run); without it the worker bundles src/workflows itself. */
  workflowBundlePath?: string;
}

export function createWorker(options: WorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: options.activities,
    ...(options.workflowBundlePath
      ? { workflowBundle: { codePath: options.workflowBundlePath } }
      : { workflowsPath }),
  });
}

export { NativeConnection };
