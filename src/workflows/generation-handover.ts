import { isCancellation, setCurrentDetails } from '@temporalio/workflow';
import type { generationSteps } from './generation-steps.js';
import type { GenerationProgress, GenerationStart, SubmittedJob } from './generation-types.js';
import { isPermanent } from './step-failures.js';

/**
 * Handing the job to a provider. A submission is quick, a local activity in the POST's workflow
 * task (its answer is in the 202), until one fails to answer in time; from then on every
 * submission, of this route or a later one, goes to the background, and the POST answers
 * `queued`. Staging the customer's images sends the hand-over to the background too: the POST does
 * not wait for the customer's host.
 */
export function handOverRules(steps: ReturnType<typeof generationSteps>, progress: GenerationProgress) {
  let inBackground = false;
  return {
    /** Whether the POST may answer: the job is with a provider, the generation ended or waits for support, or the hand-over went to the background. */
    handedOver: (): boolean =>
      inBackground || !['admitting', 'submitting', 'refunding'].includes(progress.step),
    /** From now on the POST does not wait for the hand-over. */
    toBackground(): void {
      inBackground = true;
    },
    /**
     * The job handed to route `position`. A rejection, or an acceptance the provider cannot
     * confirm, is final; any other failure of the quick hand-over (no answer in time) leaves the
     * job to the background submission.
     */
    async submit(job: GenerationStart, position: number): Promise<SubmittedJob> {
      if (inBackground) return steps.submitInBackground(job, position);
      try {
        return await steps.handOver(job, position);
      } catch (error) {
        if (isCancellation(error) || isPermanent(error)) throw error;
        inBackground = true;
        setCurrentDetails('the provider is slow to accept; submitting in the background');
        return steps.submitInBackground(job, position);
      }
    },
  };
}
