import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type LogEntry,
  type LogLevel,
} from '@temporalio/worker';
import type { Logger } from 'pino';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  type OpenTelemetrySinks,
} from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from '../observability/tracing.js';
import { workflowSpanProcessor } from '../observability/workflow-spans.js';
import { classifyFailure } from '../activities/failures.js';
import type { Activities } from '../activities/index.js';
import { providerWaitQueue, thumbnailQueue, webhookQueue } from '../workflows/generation-types.js';
import { readFile } from 'node:fs/promises';
import { bundleWorkflows } from './workflow-bundle.js';
import {
  buildIdOf,
  settleCurrentVersion,
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
  /** Short activities (admission aside, which is local) running at once: submit, persist, refund, expire. */
  maxConcurrentActivities?: number;
  /** Provider waits running at once; each is an idle poll loop, so many fit. */
  maxProviderWaits?: number;
  /**
   * Which task queues it polls: `all` (the default), `generations` (everything but the gallery's
   * thumbnails, which other workers make), or `thumbnails` only.
   */
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

export type WorkerQueues = 'all' | 'generations' | 'thumbnails';

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
 * The workflows and their short activities poll the task queue; the provider
 * waits poll a queue of their own (providerWaitQueue). A wait holds its slot
 * for as long as the provider works, minutes for a video: sharing one slot
 * budget, a few hundred slow jobs would leave no slot for anyone's submit,
 * persist or refund.
 */
export async function createWorker(options: WorkerOptions): Promise<GenerationWorker> {
  const { activities } = options;
  const interceptors = {
    activity: options.tracing ? [activitySpans, classifyActivityFailures] : [classifyActivityFailures],
  };
  const sinks = workflowSpanSinks(options.tracing);
  const waits = { waitForProvider: activities.waitForProvider.bind(activities) };
  const thumbnails = { makeThumbnails: activities.makeThumbnails.bind(activities) };
  const queues = options.queues ?? 'all';
  // Past the grace, activities still running are cancelled and retried elsewhere; the force time
  // leaves them a few seconds to notice (a heartbeat) and fail their attempt cleanly.
  const graceMs = options.shutdownGraceMs;
  const shutdownTimes =
    graceMs === undefined ? {} : { shutdownGraceTime: graceMs, shutdownForceTime: graceMs + 10_000 };
  // Webhook deliveries wait on receivers (15 s each): they have slots of their own too.
  const deliveries = {
    saveWebhookSubscription: activities.saveWebhookSubscription.bind(activities),
    nextWebhookEvents: activities.nextWebhookEvents.bind(activities),
    deliverWebhook: activities.deliverWebhook.bind(activities),
  };
  const steps = Object.fromEntries(
    Object.entries(activities).filter(
      ([name]) => !(name in waits) && !(name in thumbnails) && !(name in deliveries),
    ),
  );
  const code = options.workflowBundlePath ? null : await bundleWorkflows();
  const { deployment } = options;
  const version: WorkerVersion | null = deployment
    ? {
        deploymentName: deployment.name,
        buildId: buildIdOf(code ?? (await readFile(options.workflowBundlePath!, 'utf8'))),
      }
    : null;
  // Both queues belong to the version, so a pinned generation's provider wait runs on its own build.
  // A generation's active life is pinned (generationWorkflow declares it); anything that does not
  // declare a behaviour (the reconciliation and pruning sweeps, minutes long) is pinned too.
  const versioning = version
    ? {
        workerDeploymentOptions: {
          useWorkerVersioning: true,
          version,
          defaultVersioningBehavior: 'PINNED',
        } as const,
      }
    : {};
  const generationWorkers = async () => [
    await Worker.create({
      connection: options.connection,
      namespace: options.namespace,
      taskQueue: options.taskQueue,
      activities: steps,
      interceptors,
      ...shutdownTimes,
      sinks,
      ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
      ...(options.maxConcurrentActivities
        ? { maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities }
        : {}),
      workflowBundle: code === null ? { codePath: options.workflowBundlePath! } : { code },
      ...versioning,
    }),
    await Worker.create({
      connection: options.connection,
      namespace: options.namespace,
      taskQueue: providerWaitQueue(options.taskQueue),
      activities: waits,
      interceptors,
      ...shutdownTimes,
      maxConcurrentActivityTaskExecutions: options.maxProviderWaits ?? 1000,
      ...versioning,
    }),
    await Worker.create({
      connection: options.connection,
      namespace: options.namespace,
      taskQueue: webhookQueue(options.taskQueue),
      activities: deliveries,
      interceptors,
      ...shutdownTimes,
      maxConcurrentActivityTaskExecutions: 200,
      ...versioning,
    }),
  ];
  // The gallery's thumbnails: CPU-bound (libvips) and nobody waits on them, so they get a queue
  // that a deployment may hand to workers of their own (WORKER_TASK_QUEUES).
  const thumbnailWorker = () =>
    Worker.create({
      connection: options.connection,
      namespace: options.namespace,
      taskQueue: thumbnailQueue(options.taskQueue),
      activities: thumbnails,
      interceptors,
      ...shutdownTimes,
      ...versioning,
    });
  const workers = [
    ...(queues === 'thumbnails' ? [] : await generationWorkers()),
    ...(queues === 'generations' ? [] : [await thumbnailWorker()]),
  ];
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

/** A span for each activity run, the child of the span its workflow scheduled it under (from its headers). */
const activitySpans: ActivityInterceptorsFactory = (ctx) => ({
  inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
  outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
});

/**
 * Where traced workflows send their spans (the workflow sandbox cannot export them itself). A
 * workflow is traced when its start carried a trace context, which an API with tracing gives it
 * even if this worker has none: then the spans are dropped here instead of reaching an
 * unregistered sink.
 */
function workflowSpanSinks(tracing: Tracing | undefined): InjectedSinks<OpenTelemetrySinks> {
  if (tracing) return { exporter: makeWorkflowExporter(workflowSpanProcessor(tracing), tracing.resource) };
  return { exporter: { export: { fn: () => undefined } } };
}

/** Every activity's failure is classified (retryable or not) in one place: see classifyFailure. */
const classifyActivityFailures: ActivityInterceptorsFactory = () => ({
  inbound: {
    async execute(input, next) {
      try {
        return await next(input);
      } catch (error) {
        throw classifyFailure(error);
      }
    },
  },
});

const pinoLevel: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK's worker metrics the Grafana dashboard reads (as installTemporalRuntime names them);
 * the metrics test checks that a real worker serves each one.
 */
export const temporalSdkMetricNames = [
  'temporal_worker_task_slots_available',
  'temporal_worker_task_slots_used',
  'temporal_num_pollers',
  'temporal_sticky_cache_size',
  'temporal_workflow_task_schedule_to_start_latency_seconds',
  'temporal_workflow_task_execution_latency_seconds',
  'temporal_activity_schedule_to_start_latency_seconds',
  'temporal_activity_execution_latency_seconds',
  'temporal_request_latency_seconds',
] as const;

/**
 * Sends the SDK's own logs (worker state, workflow and activity logs) through our JSON logger and,
 * given `metricsAddress` (host:port), serves the SDK's own worker metrics there in Prometheus's
 * format (task slots, poll and schedule-to-start latencies, sticky cache, workflow and activity
 * outcomes), named the Prometheus way: seconds, and `_total` on counters. Call once, first.
 */
export function installTemporalRuntime(logger: Logger, metricsAddress?: string): void {
  Runtime.install({
    logger: new DefaultLogger('INFO', temporalLogSink(logger)),
    ...(metricsAddress
      ? {
          telemetryOptions: {
            metrics: {
              prometheus: {
                bindAddress: metricsAddress,
                countersTotalSuffix: true,
                unitSuffix: true,
                useSecondsForDurations: true,
              },
            },
          },
        }
      : {}),
  });
}

/**
 * One SDK log entry as one JSON line. The SDK puts a failure under `error`; pino serializes
 * errors (message, type, stack) only under `err`, and would print `{}`.
 */
export function temporalLogSink(logger: Logger): (entry: LogEntry) => void {
  return ({ level, message, meta }) => {
    const { error, ...rest } = meta ?? {};
    // The provider-wait worker has no workflows by design; the SDK warns about that at every start.
    const expected = message === 'No workflows registered, not polling for workflow tasks';
    logger[expected ? 'info' : pinoLevel[level]](
      error === undefined ? rest : { ...rest, err: error },
      message,
    );
  };
}

export { NativeConnection };
