import { NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
import type { Tracing } from '../observability/tracing.js';
import type { Activities } from '../activities/index.js';
import { bundleWorkflows } from './workflow-bundle.js';
import { createQueueWorkers, type WorkerQueues } from './worker-queues.js';
import {
  settleCurrentVersion,
  versioningOptions,
  workerVersionOf,
  type CurrentVersionPolicy,
  type WorkerVersion,
} from './worker-version.js';

interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests build one per run); without it the workflows are bundled now. */
  workflowBundlePath?: string;
  maxCachedWorkflows?: number;
  /** Short activities (the debit aside, which is local) running at once: submit, persist, refund, expire. */
  maxConcurrentActivities?: number;
  /** Provider waits running at once; each is an idle poll loop, so many fit. */
  maxProviderWaits?: number;
  /** Batch activities running at once on the batches queue (a slice holds one up to BATCH_SLICE_MS). */
  maxBatchSlices?: number;
  /** Which task queues it polls (see WorkerQueues); `all` by default. */
  queues?: WorkerQueues;
  /** After a shutdown starts, how long activities in flight may run on before they are cancelled. */
  shutdownGraceMs?: number;
  /** Traced workflows' spans, and their activities', are exported through it (OTEL_EXPORTER_OTLP_ENDPOINT). */
  tracing?: Tracing;
  /**
   * The Worker Deployment it runs in (its version's build id is the bundle's digest), and what it
   * does about the deployment's Current Version once it polls (see CurrentVersionPolicy). Without
   * it the worker is unversioned (the time-skipping test server has no Worker Deployments).
   */
  deployment?: { name: string; currentVersion: CurrentVersionPolicy };
}

/** A generation worker: one or more Temporal workers that start, run and stop together. */
interface GenerationWorker {
  /** Runs until shutdown() or a shutdown signal (SIGINT, SIGTERM); tasks in flight finish first. */
  run(): Promise<void>;
  /** Runs until `work` settles, then shuts down. */
  runUntil<R>(work: Promise<R> | (() => Promise<R>)): Promise<R>;
  shutdown(): void;
  /** Whether it polls its task queues (for readiness). */
  polling(): boolean;
  /** Its deployment and build id (null: unversioned). */
  version: WorkerVersion | null;
  /**
   * The deployment's Current Version once run() has applied the current-version policy (its build
   * id; null when the deployment has none); rejects when that failed (the worker runs on).
   */
  currentVersion(): Promise<string | null>;
}

/**
 * The worker of each task queue it polls (createQueueWorkers), in the Worker Deployment's version
 * when it has one, run and stopped as one.
 */
export async function createWorker(options: WorkerOptions): Promise<GenerationWorker> {
  const workflowBundle: WorkflowBundleOption = options.workflowBundlePath
    ? { codePath: options.workflowBundlePath }
    : { code: await bundleWorkflows() };
  const { deployment } = options;
  const version = deployment ? await workerVersionOf(deployment.name, workflowBundle) : null;
  const workers = await createQueueWorkers({
    ...options,
    queues: options.queues ?? 'all',
    workflowBundle,
    versioning: versioningOptions(version),
  });
  let settled: Promise<string | null> | undefined;
  const shutdown = () => {
    for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  const run = async () => {
    // The server learns of the version from the polls run() starts; the policy applies once it has.
    settled ??= version
      ? settleCurrentVersion(options.connection, options.namespace, version, deployment!.currentVersion, {
          taskQueues: workers.map((worker) => worker.options.taskQueue),
        })
      : Promise.resolve(null);
    settled.catch(() => undefined);
    // One stopping (a fatal error) stops the others, so the process never runs half a worker.
    const outcomes = await Promise.allSettled(workers.map((worker) => worker.run().finally(shutdown)));
    const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, 'the generation worker failed');
  };
  /** Runs until `work` settles; the work's own failure is the one reported. */
  const runUntil = async <R>(work: Promise<R> | (() => Promise<R>)): Promise<R> => {
    const running = run();
    let result: R;
    try {
      result = await Promise.race([
        typeof work === 'function' ? work() : work,
        running.then(() => Promise.reject(new Error('the worker stopped before the work was done'))),
      ]);
    } catch (error) {
      shutdown();
      await running.catch(() => undefined);
      throw error;
    }
    shutdown();
    await running;
    return result;
  };
  /** Whether every part of the worker is polling its task queue. */
  const polling = () => workers.every((worker) => worker.getState() === 'RUNNING');
  return {
    run,
    runUntil,
    shutdown,
    polling,
    version,
    currentVersion: () => settled ?? Promise.reject(new Error('the worker has not run')),
  };
}

export { NativeConnection };
