import { Worker, type NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
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
import {
  batchQueue,
  providerWaitQueue,
  thumbnailQueue,
  webhookQueue,
} from '../workflows/generation-types.js';
import type { VersioningOptions } from './worker-version.js';

/**
 * Which task queues a worker polls: `all`, `generations` (everything but the gallery's thumbnails,
 * which other workers make), or `thumbnails` only.
 */
export type WorkerQueues = 'all' | 'generations' | 'thumbnails';

export interface QueueWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  queues: WorkerQueues;
  workflowBundle: WorkflowBundleOption;
  maxCachedWorkflows?: number;
  maxConcurrentActivities?: number;
  maxProviderWaits?: number;
  /** Batch activities (a slice holds one for up to BATCH_SLICE_MS) at once, on the batches queue. */
  maxBatchSlices?: number;
  shutdownGraceMs?: number;
  tracing?: Tracing;
  /** The same on every queue's worker (see versioningOptions). */
  versioning: VersioningOptions;
}

/** Webhook delivery attempts (and looks) a worker runs at once (docs/operating.md derives what they serve). */
export const webhookDeliverySlots = 200;

/**
 * One Temporal worker a task queue: the workflows and their short activities poll the task queue;
 * the provider waits poll a queue of their own (providerWaitQueue), the batches theirs, workflows
 * and slices (batchQueue), and the webhook deliveries theirs, workflows and activities (webhookQueue). A wait holds its slot for as
 * long as the provider works, minutes for a video: sharing one slot budget, a few hundred slow jobs
 * would leave no slot for anyone's submit, persist or refund.
 */
export async function createQueueWorkers(options: QueueWorkerOptions): Promise<Worker[]> {
  const { activities, queues, versioning } = options;
  const shared = {
    connection: options.connection,
    namespace: options.namespace,
    interceptors: {
      activity: options.tracing ? [activitySpans, classifyActivityFailures] : [classifyActivityFailures],
    },
    ...shutdownTimes(options.shutdownGraceMs),
    ...versioning,
  };
  const waits = { readProviderJob: activities.readProviderJob.bind(activities) };
  const thumbnails = { makePendingThumbnails: activities.makePendingThumbnails.bind(activities) };
  // Webhook deliveries (their workflows and activities) wait on receivers (15 s each), and there
  // may be many: their own task queue, slots and workflow tasks, apart from the generations'.
  const deliveries = {
    saveWebhookSubscription: activities.saveWebhookSubscription.bind(activities),
    nextWebhookEvents: activities.nextWebhookEvents.bind(activities),
    deliverWebhook: activities.deliverWebhook.bind(activities),
  };
  // Batches (their workflows and slices): a slice holds its slot for up to BATCH_SLICE_MS, and one
  // account may open many: their own task queue and slots, so they never take a generation step's.
  const batches = {
    startBatch: activities.startBatch.bind(activities),
    runBatchSlice: activities.runBatchSlice.bind(activities),
    cancelBatchGenerations: activities.cancelBatchGenerations.bind(activities),
    finishBatch: activities.finishBatch.bind(activities),
  };
  // The steps keep the batch activities too: a batch started before they had a queue of their own
  // runs its slices on the task queue until it ends.
  // The short reads of provider jobs run as local activities, on the workflows' worker: they keep
  // readProviderJob too (its long reads, a synchronous provider's calls, take the waits' queue).
  const steps = Object.fromEntries(
    Object.entries(activities).filter(([name]) => !(name in thumbnails) && !(name in deliveries)),
  );
  const generationWorkers = async () => [
    await Worker.create({
      ...shared,
      taskQueue: options.taskQueue,
      activities: steps,
      sinks: workflowSpanSinks(options.tracing),
      ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
      ...(options.maxConcurrentActivities
        ? { maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities }
        : {}),
      workflowBundle: options.workflowBundle,
    }),
    await Worker.create({
      ...shared,
      taskQueue: providerWaitQueue(options.taskQueue),
      activities: waits,
      maxConcurrentActivityTaskExecutions: options.maxProviderWaits ?? 1000,
    }),
    await Worker.create({
      ...shared,
      taskQueue: batchQueue(options.taskQueue),
      activities: batches,
      maxConcurrentActivityTaskExecutions: options.maxBatchSlices ?? 100,
      sinks: workflowSpanSinks(options.tracing),
      ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
      workflowBundle: options.workflowBundle,
    }),
    await Worker.create({
      ...shared,
      taskQueue: webhookQueue(options.taskQueue),
      activities: deliveries,
      maxConcurrentActivityTaskExecutions: webhookDeliverySlots,
      sinks: workflowSpanSinks(options.tracing),
      ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
      workflowBundle: options.workflowBundle,
    }),
  ];
  // The gallery's thumbnails: CPU-bound (libvips) and nobody waits on them, so they get a queue
  // that a deployment may hand to workers of their own (WORKER_TASK_QUEUES).
  const thumbnailWorker = () =>
    Worker.create({ ...shared, taskQueue: thumbnailQueue(options.taskQueue), activities: thumbnails });
  return [
    ...(queues === 'thumbnails' ? [] : await generationWorkers()),
    ...(queues === 'generations' ? [] : [await thumbnailWorker()]),
  ];
}

/**
 * Past the grace, activities still running are cancelled and retried elsewhere; the force time
 * leaves them a few seconds to notice (a heartbeat) and fail their attempt cleanly.
 */
function shutdownTimes(graceMs: number | undefined) {
  return graceMs === undefined ? {} : { shutdownGraceTime: graceMs, shutdownForceTime: graceMs + 10_000 };
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

/**
 * Every activity's failure is classified (retryable or not) in one place, src/activities/failures.ts:
 * the failures activities mean are named there, and classifyFailure sorts whatever else they throw.
 */
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
