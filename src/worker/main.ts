import v8 from 'node:v8';
import { Client, Connection } from '@temporalio/client';
import { createActivities } from '../activities/index.js';
import { ensureSearchAttributes } from '../temporal/search-attributes-setup.js';
import {
  ensureReconciliationSchedule,
  removeLegacyReconciliationSchedule,
} from '../temporal/reconciliation-schedule.js';
import { ensurePruningSchedule } from '../temporal/pruning-schedule.js';
import { ensureThumbnailsSchedule } from '../temporal/thumbnails-schedule.js';
import { createDatabasePool } from '../db/pool.js';
import { createLogger } from '../process/logger.js';
import { loadConfigOrExit, reportReady, waitForDependenciesOrExit } from '../process/lifecycle.js';
import { createWorker, NativeConnection } from './create-worker.js';
import { installTemporalRuntime } from './temporal-runtime.js';
import { prebuiltWorkflowBundle } from './workflow-bundle.js';
import { activityDeps, healthPolicy, pruningOptions, reconciliationOptions } from './worker-deps.js';
import { startProbing } from './provider-health-tracker.js';
import { startHealthServer } from './health-server.js';
import { temporalConnectionOptions } from '../temporal/connection-options.js';
import { logUnconfiguredProviders } from './provider-registry.js';
import { createWorkerMetrics } from './worker-metrics.js';
import { startMetricsServer } from '../observability/metrics-server.js';
import { startTracing } from '../observability/tracing.js';
import { providersWithCredentials, requestBudgets } from '../config/service-config.js';
import { wireBatchAdmission } from './batch-admission.js';

/** `npm run worker`: runs generation workflows and their activities. Configured by environment variables only. */
// The workflow thread, which the SDK starts later, gets a young generation of 8 MB instead of Node
// 24's 64: its activations allocate little per task, but the larger one filled up under load and
// stayed resident (bench:idle). Isolates made from here on read the flag; this thread keeps what
// its command line gave it (node-options.ts).
v8.setFlagsFromString('--max-semi-space-size=4');
const config = loadConfigOrExit();
const logger = createLogger('worker', config.LOG_LEVEL);
installTemporalRuntime(
  logger,
  config.WORKER_TEMPORAL_METRICS_PORT === undefined
    ? undefined
    : hostPort(config.METRICS_HOST, config.WORKER_TEMPORAL_METRICS_PORT),
);
const tracing = config.OTEL_EXPORTER_OTLP_ENDPOINT
  ? startTracing('generation-worker', config.OTEL_EXPORTER_OTLP_ENDPOINT)
  : undefined;
await waitForDependenciesOrExit(config, logger, 'wait');
const pool = await createDatabasePool(config.DATABASE_URL, { maximumPoolSize: config.DATABASE_POOL_SIZE });
const metrics =
  config.WORKER_METRICS_PORT === undefined
    ? undefined
    : createWorkerMetrics(pool, {
        queuedTooLongMs: config.QUEUED_TOO_LONG_MS,
        providers: [...providersWithCredentials(config)],
        log: logger.child({ component: 'metrics' }),
        budgets: requestBudgets(config),
      });
const temporalOptions = temporalConnectionOptions(config.TEMPORAL_ADDRESS, config);
const connection = await NativeConnection.connect(temporalOptions);
// The worker's own client: search attributes, the reconciliation, pruning and thumbnails schedules, and the sweep's look-ups.
const clientConnection = await Connection.connect(temporalOptions);
const client = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE });
await registerSearchAttributes();
await logUnconfiguredProviders(config, pool, logger);
const { deps, providers, budgetStore } = activityDeps(
  config,
  pool,
  logger,
  { temporal: () => Promise.resolve(client) },
  metrics,
);
// Batches admit their lines here, through the admission a POST goes through (not on a thumbnail-only worker).
const batches =
  config.WORKER_TASK_QUEUES === 'thumbnails' ? null : await wireBatchAdmission(config, pool, logger);
if (batches) {
  deps.batchLines = batches.lines;
  deps.batchTiming = { pollIntervalMs: config.BATCH_POLL_INTERVAL_MS, sliceMs: config.BATCH_SLICE_MS };
}
// A thumbnail-only worker (WORKER_TASK_QUEUES=thumbnails) never calls a provider: it does not probe them.
const stopProbing =
  config.WORKER_TASK_QUEUES === 'thumbnails'
    ? () => Promise.resolve()
    : startProbing(providers, pool, healthPolicy(config), logger.child({ component: 'provider-health' }));
// A bundle built ahead (WORKFLOW_BUNDLE_PATH, or the one `npm run build` put beside this module) starts the
// worker without webpack; without one it bundles the workflows now.
const workflowBundlePath = config.WORKFLOW_BUNDLE_PATH ?? prebuiltWorkflowBundle();
const worker = await createWorker({
  connection,
  namespace: config.TEMPORAL_NAMESPACE,
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  activities: createActivities(deps),
  workflowBundlePath,
  maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
  maxConcurrentActivities: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
  maxProviderWaits: config.WORKER_MAX_PROVIDER_WAITS,
  maxBatchSlices: config.WORKER_MAX_BATCH_SLICES,
  shutdownGraceMs: config.WORKER_SHUTDOWN_GRACE_MS,
  tracing,
  queues: config.WORKER_TASK_QUEUES,
  deployment: { name: config.WORKER_DEPLOYMENT_NAME, currentVersion: config.WORKER_SET_CURRENT_VERSION },
});
const schedule = await ensureReconciliationSchedule(client, {
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  intervalMs: config.RECONCILE_INTERVAL_MS,
  options: reconciliationOptions(config),
});
const legacyScheduleRemoved = await removeLegacyReconciliationSchedule(client, config.TEMPORAL_TASK_QUEUE);
const pruningSchedule = await ensurePruningSchedule(client, {
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  intervalMs: config.PRUNE_INTERVAL_MS,
  options: pruningOptions(config),
});
const thumbnailsSchedule = await ensureThumbnailsSchedule(client, {
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  intervalMs: config.THUMBNAIL_SWEEP_INTERVAL_MS,
  options: { batchSize: config.THUMBNAIL_SWEEP_BATCH_SIZE, maxBatches: 20 },
});
logger.info(
  {
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    namespace: config.TEMPORAL_NAMESPACE,
    reconciliationSchedule: schedule,
    legacyScheduleRemoved,
    pruningSchedule,
    thumbnailsSchedule,
    workflowBundle: workflowBundlePath ?? 'bundled at start',
  },
  'worker running',
);
// Worker.run() handles SIGINT/SIGTERM itself: it stops polling, lets running tasks finish (activities
// for up to WORKER_SHUTDOWN_GRACE_MS; then they are cancelled, and retried by another worker), then resolves.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () =>
    logger.info(
      { signal, graceMs: config.WORKER_SHUTDOWN_GRACE_MS },
      'shutting down: polling stopped; activities in flight may finish within the grace time',
    ),
  );
const running = worker.run();
// Ready once the version policy is applied and, when this version is current, its task queues are
// routed by it: a generation started then is picked up (the wait is bounded; see settleCurrentVersion).
await worker.currentVersion().then(
  (current) =>
    logger.info(
      { ...worker.version, currentBuildId: current, policy: config.WORKER_SET_CURRENT_VERSION },
      current === worker.version?.buildId
        ? 'worker version is the deployment’s current version'
        : 'worker version is not current: only runs pinned to it come here (an operator sets the current version)',
    ),
  (error: unknown) => logger.error({ err: error, ...worker.version }, 'could not set the current version'),
);
const health =
  config.WORKER_HEALTH_PORT === undefined
    ? null
    : await startHealthServer({
        host: config.WORKER_HEALTH_HOST,
        port: config.WORKER_HEALTH_PORT,
        db: pool,
        temporal: client,
        polling: () => worker.polling(),
      });
const metricsServer =
  metrics &&
  (await startMetricsServer({
    host: config.METRICS_HOST,
    port: config.WORKER_METRICS_PORT!,
    registry: metrics.registry,
    onError: (error) => logger.warn({ err: error }, 'metrics scrape failed'),
  }));
reportReady();
await running.catch((error: unknown) => {
  // Activities that outlived the grace and ignored their cancellation: the process exits anyway.
  logger.error({ err: error }, 'the worker did not stop cleanly');
  process.exitCode = 1;
});
health?.close();
await metricsServer?.close();
// Whatever queries the pool on its own (the probes, batch admission's listener and reloads) stops first.
await stopProbing();
await batches?.close();
await budgetStore.close();
await connection.close();
await clientConnection.close();
await pool.end();
await tracing?.shutdown();
logger.info('worker stopped');

/** Our search attributes must exist before a workflow sets them; registering is idempotent. */
async function registerSearchAttributes(): Promise<void> {
  try {
    const added = await ensureSearchAttributes(clientConnection, config.TEMPORAL_NAMESPACE);
    if (added.length > 0) logger.info({ added }, 'registered search attributes');
  } catch (error) {
    logger.warn(
      { err: error },
      'could not register search attributes (does this worker have operator rights?); register GenerationStatus, AccountId, Model, GenerationId (Keyword) and NeedsReview (Bool) by hand',
    );
  }
}

/** host:port, with brackets around an IPv6 address. */
function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
