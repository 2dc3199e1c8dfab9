import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { NativeConnection, WorkflowBundleOption } from '@temporalio/worker';

/** A worker's place in its Worker Deployment: the deployment and the build of the workflow code it runs. */
export interface WorkerVersion {
  deploymentName: string;
  buildId: string;
}

/**
 * What a worker does about its deployment's Current Version as it starts:
 * - `when-none`: makes its own version current when the deployment has none (a first start, the
 *   dev server of `npm start` and `npm test`); a version already current stays, for operators to change;
 * - `always`: makes its own version current (a developer's `npm start` after editing the workflow);
 * - `never`: leaves it to operators (`temporal worker deployment set-current-version`).
 */
export type CurrentVersionPolicy = 'when-none' | 'always' | 'never';

/**
 * The build id of a workflow bundle: a digest of its code, so two builds of the same code share an
 * id and any change to the workflow code (or what it bundles) gets a new one.
 */
export function buildIdOf(bundleCode: string): string {
  return createHash('sha256').update(bundleCode).digest('hex').slice(0, 16);
}

/** The version a worker of `deploymentName` runs in: its build id is the bundle's digest. */
export async function workerVersionOf(
  deploymentName: string,
  bundle: WorkflowBundleOption,
): Promise<WorkerVersion> {
  const code = 'code' in bundle ? bundle.code : await readFile(bundle.codePath, 'utf8');
  return { deploymentName, buildId: buildIdOf(code) };
}

/** The Worker.create options that put a worker in its version; none for an unversioned worker. */
export type VersioningOptions = ReturnType<typeof versioningOptions>;

/**
 * Every task queue belongs to the version, so a pinned generation's provider wait runs on its own
 * build. A generation's active life is pinned (generationWorkflow declares it); anything that does
 * not declare a behaviour (the reconciliation and pruning sweeps, minutes long) is pinned too.
 */
export function versioningOptions(version: WorkerVersion | null) {
  return version
    ? {
        workerDeploymentOptions: {
          useWorkerVersioning: true,
          version,
          defaultVersioningBehavior: 'PINNED',
        } as const,
      }
    : {};
}

/** The Current Version of a deployment, or null when it has none (or does not exist yet). */
export async function currentVersion(
  connection: Pick<NativeConnection, 'workflowService'>,
  namespace: string,
  deploymentName: string,
): Promise<{ buildId: string | null; conflictToken: Uint8Array | null; propagating: boolean }> {
  try {
    const described = await connection.workflowService.describeWorkerDeployment({
      namespace,
      deploymentName,
    });
    const info = described.workerDeploymentInfo;
    const current = info?.routingConfig?.currentDeploymentVersion;
    return {
      buildId: current?.buildId || null,
      conflictToken: described.conflictToken ?? null,
      // ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS: task queues do not all route by the change yet.
      propagating: Number(info?.routingConfigUpdateState ?? 0) === 1,
    };
  } catch (error) {
    if (grpcCode(error) === notFound) return { buildId: null, conflictToken: null, propagating: false };
    throw error;
  }
}

/**
 * Applies the policy once the worker polls (the server learns of a version from its polls, so a
 * version nobody has polled with cannot be made current yet: retried for up to `timeoutMs`).
 * Answers the deployment's Current Version afterwards, once every task queue routes by it.
 */
export async function settleCurrentVersion(
  connection: Pick<NativeConnection, 'workflowService'>,
  namespace: string,
  version: WorkerVersion,
  policy: CurrentVersionPolicy,
  {
    timeoutMs = 30_000,
    identity = 'generation-worker',
    taskQueues = [],
  }: { timeoutMs?: number; identity?: string; taskQueues?: string[] } = {},
): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const current = await currentVersion(connection, namespace, version.deploymentName);
    const ours = current.buildId === version.buildId;
    if (policy === 'never' || ours || (policy === 'when-none' && current.buildId !== null)) {
      const routed =
        !current.propagating &&
        (!ours || (await queuesInVersion(connection, namespace, version, taskQueues)));
      if (routed || Date.now() > deadline) return current.buildId;
      await pause();
      continue;
    }
    try {
      await connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        ...(current.conflictToken ? { conflictToken: current.conflictToken } : {}),
        identity,
      });
      continue;
    } catch (error) {
      // Not registered yet (no poll seen), or another worker changed it meanwhile: look again.
      const retryable = [notFound, failedPrecondition, aborted].includes(grpcCode(error) ?? -1);
      if (!retryable || Date.now() > deadline) throw error;
      await pause();
    }
  }
}

/**
 * Whether each of the worker's task queues has joined its version. A queue joins when the server
 * has seen a poll on it, some time after the version became current; until then the queue is not
 * routed by the version, and a generation started on it waits for nobody.
 */
async function queuesInVersion(
  connection: Pick<NativeConnection, 'workflowService'>,
  namespace: string,
  version: WorkerVersion,
  taskQueues: string[],
): Promise<boolean> {
  if (taskQueues.length === 0) return true;
  const described = await connection.workflowService.describeWorkerDeploymentVersion({
    namespace,
    deploymentVersion: { deploymentName: version.deploymentName, buildId: version.buildId },
  });
  const joined = new Set(
    (described.workerDeploymentVersionInfo?.taskQueueInfos ?? []).map((queue) => queue.name),
  );
  return taskQueues.every((queue) => joined.has(queue));
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 250));

const notFound = 5;
const failedPrecondition = 9;
const aborted = 10;

function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}
