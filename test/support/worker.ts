import { mkdtemp, rm, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import type { ActivityDeps } from '../../src/activities/activity-deps.js';
import { createActivities } from '../../src/activities/index.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createLogger } from '../../src/process/logger.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { signalSimulatedJobEnded } from '../../src/worker/simulated-push.js';
import type { Provider } from '../../src/providers/provider.js';
import type { FrameFetchPolicy } from '../../src/providers/simulated/video-drawing.js';
import { buildResultHost } from '../../src/result-host/server.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';

/**
 * The Worker Deployment test workers run in: every test file's worker runs the one bundle the run
 * built, so they share one version, which the first to start makes current on the shared dev server.
 */
export const testDeployment = 'generation-service-test';

export interface TestWorker {
  taskQueue: string;
  storageDir: string;
  resultBaseUrl: string;
  /** The environment an API started with startTestApi needs to use this worker and storage. */
  apiEnv: Record<string, string>;
  /** What its activities are built on; a change (a provider swapped) applies to the next activity. */
  deps: ActivityDeps;
  /** Stops the worker (as a crash would not: tasks in flight finish or are abandoned to their timeouts). */
  stopWorker(): Promise<void>;
  /** Starts a fresh worker on the same task queue (after stopWorker). */
  startWorker(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A real worker on the shared dev server, on a task queue of its own, with
 * the simulated provider (short delay) and storage in a temporary folder
 * served by a real result host.
 */
export async function startTestWorker(
  db: DatabasePool,
  options: {
    simDelayMs?: number;
    concurrencyLimit?: number;
    overrides?: Partial<ActivityDeps>;
    /** Worker slots for short activities (the worker's default: 100). */
    maxConcurrentActivities?: number;
    /** Worker slots for batch activities, on the batches queue (the worker's default: 100). */
    maxBatchSlices?: number;
    /** Stands between the worker and the simulated provider (an outage, a counter). */
    wrapProvider?: (simulated: Provider) => Provider;
    /** What the simulated provider's frame fetches may reach besides public addresses (OUTBOUND_ALLOW_CIDRS). */
    frameFetch?: FrameFetchPolicy;
    /** Its Worker Deployment (default: the one every test worker of this bundle shares). */
    deploymentName?: string;
    /** Another build of the workflows (default: the one the test run built). */
    workflowBundlePath?: string;
  } = {},
): Promise<TestWorker> {
  const taskQueue = `test-${randomBase62(10)}`;
  const storageDir = await mkdtemp(path.join(os.tmpdir(), 'results-'));
  await chmod(storageDir, 0o755);
  const resultPort = await freePort();
  const resultBaseUrl = `http://127.0.0.1:${resultPort}`;
  const resultHost: FastifyInstance = await buildResultHost({
    storageDir,
    logger: createLogger('results-test', 'silent'),
  });
  await resultHost.listen({ host: '127.0.0.1', port: resultPort });

  // The worker's own Temporal client (the reconciliation sweep's look-ups), connected on first use.
  let client: Promise<{ connection: Connection; client: Client }> | undefined;
  const temporal = async () => {
    client ??= Connection.connect({ address: inject('temporalAddress') }).then((connection) => ({
      connection,
      client: new Client({ connection }),
    }));
    return (await client).client;
  };
  const deps: ActivityDeps = {
    db,
    providerFor: () => served,
    storage: new LocalStorage(storageDir, resultBaseUrl),
    concurrencyLimit: options.concurrencyLimit ?? 10,
    temporal,
    ...options.overrides,
  };
  const provider = new SimulatedProvider(db, {
    delayMs: options.simDelayMs ?? 200,
    // As the worker does: our own files are read from storage, other URLs fetched under the rules.
    storage: deps.storage,
    ...(options.frameFetch ? { frameFetch: options.frameFetch } : {}),
    // As the worker does: each job's end is pushed to its generation's workflow.
    push: signalSimulatedJobEnded(temporal, createLogger('simulated-provider-test', 'silent')),
  });
  const served: Provider = options.wrapProvider ? options.wrapProvider(provider) : provider;

  let connection: NativeConnection | null = null;
  let running: Promise<void> | null = null;
  let worker: Awaited<ReturnType<typeof createWorker>> | null = null;
  const startWorker = async () => {
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    worker = await createWorker({
      connection,
      namespace: 'default',
      taskQueue,
      activities: createActivities(deps),
      workflowBundlePath: options.workflowBundlePath ?? inject('workflowBundlePath'),
      deployment: { name: options.deploymentName ?? testDeployment, currentVersion: 'when-none' },
      ...(options.maxConcurrentActivities
        ? { maxConcurrentActivities: options.maxConcurrentActivities }
        : {}),
      ...(options.maxBatchSlices ? { maxBatchSlices: options.maxBatchSlices } : {}),
    });
    running = worker.run();
    // Generations started from here on go to a current version (the first worker made it current).
    await worker.currentVersion();
  };
  const stopWorker = async () => {
    worker?.shutdown();
    await running;
    await connection?.close();
    worker = null;
    running = null;
    connection = null;
  };
  await startWorker();

  return {
    deps,
    taskQueue,
    storageDir,
    resultBaseUrl,
    apiEnv: {
      TEMPORAL_TASK_QUEUE: taskQueue,
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: resultBaseUrl,
      PROVIDER_POLL_INTERVAL_MS: '50',
    },
    stopWorker,
    startWorker,
    async close() {
      await stopWorker();
      await (await client)?.connection.close();
      // A download a test left unread holds its connection open, and close() would wait for it
      // (70 s in short-horizon once): the files are the test's, nobody is still reading them.
      resultHost.server.closeAllConnections();
      await resultHost.close();
      await rm(storageDir, { recursive: true, force: true });
    },
  };
}
