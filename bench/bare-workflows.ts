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
 * A generation's admission with no-op steps: two local activities (admit, submit), run once,
 * whether the update or the workflow asks first; the update answers when they are done.
 */
async function admitAndHandOver(): Promise<void> {
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
}

/** The lifecycle's shape with no-op steps: admission, then two activities (wait for the provider, persist). */
export async function noopLifecycleWorkflow(): Promise<string> {
  await admitAndHandOver();
  await noop(); // wait for the provider
  await noop(); // persist
  return 'succeeded';
}

/** Admission's shape with no-op steps: admission, then the wait for the provider parked on a task queue of its own. */
export async function noopAdmissionWorkflow(): Promise<string> {
  await admitAndHandOver();
  const { park } = proxyActivities<typeof activities>({
    taskQueue: `${workflowInfo().taskQueue}.waits`,
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: '3 minutes',
  });
  await park(); // wait for the provider
  return 'parked';
}
