import { setCurrentDetails } from '@temporalio/workflow';
import type { ProviderJobEnd } from '../vocabulary/generation.js';
import type { generationSteps } from './generation-steps.js';
import { errorTypes, type GenerationResumed, type GenerationStart } from './generation-types.js';
import { failureMessage, failureType } from './step-failures.js';

type Steps = ReturnType<typeof generationSteps>;

/**
 * Route failover, for a model whose plan has several provider routes (`start.routes`, in order):
 * the route submitted to last, the job as staged, and the one rule for moving on. A route gives way
 * to the plan's next only when it proved it did not take the job: it refused the submission
 * (`RouteNotAccepted`, its end recorded by the submit), or its job never started at the provider
 * (Replicate's `aborted`, recorded by leaveRoute; not while a cancel is out). The next route is
 * sent the job as staged for the first. A run that continued as new mid-wait goes on from the
 * route and staged job its predecessor carried (`carried`).
 */
export function routeFailover(start: GenerationStart, steps: Steps, carried?: GenerationResumed['route']) {
  let position = carried?.position ?? 0;
  let staged: GenerationStart | undefined = carried?.staged;
  const nextAfter = (from: number) => start.routes?.[from + 1];
  return {
    /** What a run continuing as new mid-wait carries on: the route, and the job as staged. */
    carried(): NonNullable<GenerationResumed['route']> {
      return { position, ...(staged ? { staged } : {}) };
    },
    /** The job as staged for the first route (none for a run resumed with the provider's job). */
    stage(job: GenerationStart): void {
      staged = job;
    },
    /** A submission to route `at` begins: its position. */
    enter(at: number): number {
      return (position = at);
    },
    /** After a submission failed: the next route's position when this one refused the job; undefined otherwise. */
    afterRefusal(error: unknown): number | undefined {
      const next = nextAfter(position);
      if (failureType(error) !== errorTypes.routeNotAccepted || !next) return undefined;
      setCurrentDetails(`${failureMessage(error)}; trying route ${position + 1} (${next.provider})`);
      return position + 1;
    },
    /**
     * After the provider's job ended: the staged job and the next route's position when the job
     * never started and this route was left (recorded); undefined when the job's end stands.
     */
    async afterNeverStarted(
      jobId: string,
      outcome: ProviderJobEnd<unknown>,
      canceling: boolean,
    ): Promise<{ job: GenerationStart; position: number } | undefined> {
      const next = nextAfter(position);
      if (outcome.state !== 'failed' || !outcome.neverStarted || !next || !staged || canceling)
        return undefined;
      const ended = { position, jobId, reason: outcome.message };
      if (!(await steps.leaveRoute(start.generationId, ended)).moved) return undefined;
      setCurrentDetails(
        `route ${ended.position}: ${ended.reason} Trying route ${ended.position + 1} (${next.provider}).`,
      );
      return { job: staged, position: ended.position + 1 };
    },
  };
}
