import { releaseProviderSlot } from '../db/provider-slots.js';
import { parseJobReference } from '../providers/job-reference.js';
import type { CancelActivities } from '../workflows/generation-activity-contract.js';
import type { ActivityDeps } from './activity-deps.js';

/** The activity behind a client's cancel (the workflow's cancel update decides with it). */
export function createCancelActivities(deps: Pick<ActivityDeps, 'db' | 'providerFor'>): CancelActivities {
  return {
    /**
     * Stops the provider's job if the provider confirms it never ran (see Provider.stopBeforeRun);
     * asking again after a stop answers stopped again, so a retry or a replayed workflow is safe.
     * A provider that cannot confirm it answers not stopped, and nothing changes.
     */
    async stopJobBeforeRun(reference: string, generationId: string): Promise<{ stopped: boolean }> {
      const { provider: name, jobId } = parseJobReference(reference);
      const provider = deps.providerFor(name);
      if (!provider.stopBeforeRun) return { stopped: false };
      const { stopped } = await provider.stopBeforeRun(jobId);
      if (stopped) await releaseProviderSlot(deps.db, generationId);
      return { stopped };
    },
  };
}
