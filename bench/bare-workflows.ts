// The ceilings the generation benchmarks compare against: what Temporal alone costs on this machine.
import {
  condition,
  defineUpdate,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from './bare-activities.js';

export const admitUpdate = defineUpdate<string>('admit');

/** Update-with-start of an empty workflow whose update returns at once; it then stays open, as a generation does. */
export async function emptyWorkflow(): Promise<void> {
  let done = false;
  setHandler(admitUpdate, () => {
    done = true;
    return 'admitted';
  });
  await condition(() => done);
  await condition(() => false, '1 hour');
}

const { noop: localNoop } = proxyLocalActivities<typeof activities>({ startToCloseTimeout: '10 seconds' });
const { noop } = proxyActivities<typeof activities>({ startToCloseTimeout: '10 seconds' });

/**
 * The lifecycle's shape with no-op steps: an update answered after two local activities (admit,
 * submit), then two activities (wait for the provider, persist), as a generation runs them.
 */
export async function noopLifecycleWorkflow(): Promise<string> {
  let handedOver: Promise<void> | undefined;
  const handOver = () =>
    (handedOver ??= (async () => {
      await localNoop(); // admit
      await localNoop(); // submit
    })());
  setHandler(admitUpdate, async () => {
    await handOver();
    return 'admitted';
  });
  await handOver();
  await noop(); // wait for the provider
  await noop(); // persist
  return 'succeeded';
}

/**
 * The admission's shape with no-op steps: an update answered after two local activities (admit,
 * submit), then the wait for the provider parked on a task queue of its own, as a generation's is.
 */
export async function noopAdmissionWorkflow(): Promise<string> {
  let handedOver: Promise<void> | undefined;
  const handOver = () =>
    (handedOver ??= (async () => {
      await localNoop(); // admit
      await localNoop(); // submit
    })());
  setHandler(admitUpdate, async () => {
    await handOver();
    return 'admitted';
  });
  await handOver();
  const { park } = proxyActivities<typeof activities>({
    taskQueue: `${workflowInfo().taskQueue}.waits`,
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: '3 minutes',
  });
  await park(); // wait for the provider
  return 'parked';
}
