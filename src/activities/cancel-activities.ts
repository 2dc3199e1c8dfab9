import { Context } from '@temporalio/activity';
import { releaseProviderSlot } from '../db/provider-slots.js';
import { parseJobReference } from '../providers/job-reference.js';
import type { StopAnswer } from '../providers/provider.js';
import type { CancelActivities } from '../workflows/contracts/generation.js';
import type { ActivityDeps } from './activity-deps.js';

/** The activity behind a client's cancel (the workflow's cancel update decides with it). */
export function createCancelActivities(deps: Pick<ActivityDeps, 'db' | 'providerFor'>): CancelActivities {
  return {
    /**
     * Stops the provider's job if the provider confirms it never ran (see Provider.stopBeforeRun);
     * a cancel sent whose answer does not prove that is `unknown` (the workflow then waits for the
     * job's end, and the wait gives the in-flight place back). A retry tells the provider it asks
     * again (the first answer was lost): stopped again, or `unknown` when it cannot tell. A
     * provider that cannot stop a job answers not stopped, and nothing changes.
     */
    async stopJobBeforeRun(reference: string, generationId: string): Promise<StopAnswer> {
      const { provider: name, jobId } = parseJobReference(reference);
      const provider = deps.providerFor(name);
      if (!provider.stopBeforeRun) return { stopped: false };
      const { stopped } = await provider.stopBeforeRun(jobId, { again: Context.current().info.attempt > 1 });
      if (stopped === true) await releaseProviderSlot(deps.db, generationId);
      return { stopped };
    },
  };
}
