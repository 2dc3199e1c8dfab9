import { condition, isCancellation, setHandler } from '@temporalio/workflow';
import { debitErrors } from './generation-errors.js';
import { admitUpdate } from './generation-messages.js';
import type { generationSteps } from './generation-steps.js';
import type {
  AdmitResult,
  DebitDecision,
  DebitOutcome,
  GenerationResumed,
  GenerationStart,
} from './generation-types.js';
import { debitFailure } from './step-failures.js';

/**
 * The debit as the active run holds it: one decision (the `debit` step, run once whether the front
 * door's `admit` update or the story asks first; or the decision a support resume carries), and what
 * the admit update answers for it. An accepted generation's answer waits until `handedOver()`, so
 * the 202 says what the provider did with the job.
 */
export function debitRules(
  start: GenerationStart,
  steps: ReturnType<typeof generationSteps>,
  resumed: GenerationResumed | undefined,
  handedOver: () => boolean,
) {
  // A keyed generation records its key in PostgreSQL with its debit; the record answers for the
  // key until its horizon. Without an Idempotency-Key there is no key to hold.
  const keyed = start.idempotencyKey !== null;
  const horizon = Date.parse(start.createdAt) + start.timing.idempotencyRetentionMs;
  let debit: Promise<DebitOutcome> | undefined = resumed && Promise.resolve(resumed.admission);
  let decision: DebitOutcome | undefined = resumed?.admission;
  /** Why the debit could not complete, when it was a bug: the run then ends failed, for operators to see. */
  let broke: string | undefined;

  const decided = () => (debit ??= decide());
  /** Whether this generation holds its Idempotency-Key until the horizon (a retry with it is a replay). */
  const holdsKey = (made: DebitDecision) => keyed && (made.outcome === 'accepted' || made.claimsKey);
  /** What the admit update answers for this generation (its retention run answers the same). */
  const answerFor = (made: DebitDecision): AdmitResult => ({
    generationId: start.generationId,
    fingerprint: start.fingerprint,
    admission: made,
    keyHeldUntil: new Date(holdsKey(made) ? horizon : Date.parse(start.createdAt)).toISOString(),
    createdAt: start.createdAt,
  });
  setHandler(admitUpdate, async () => {
    const made = await decided();
    if (made.outcome === 'key_held') return made.holder;
    if (made.outcome === 'accepted') await condition(handedOver);
    return answerFor(made);
  });

  /** The debit's decision, or a refusal when it could not complete (see debitFailure). */
  async function decide(): Promise<DebitOutcome> {
    try {
      if (!keyed) return (decision = await steps.debit(start));
      const claim = { heldUntil: new Date(horizon).toISOString(), at: new Date(Date.now()).toISOString() };
      return (decision = await steps.debit(start, claim));
    } catch (error) {
      if (isCancellation(error)) throw error;
      const refusal = debitFailure(error);
      if (refusal === debitErrors.internal) broke = error instanceof Error ? error.message : String(error);
      return (decision = { outcome: 'rejected', error: refusal, claimsKey: false });
    }
  }

  return {
    /** The decision (the debit runs on the first ask). */
    decided,
    /** What the admit update answers once the generation was debited (its retention run keeps it). */
    answer(): AdmitResult {
      return answerFor(decision as DebitDecision);
    },
    /** Why the debit could not complete, when it was a bug (undefined otherwise). */
    get broke(): string | undefined {
      return broke;
    },
  };
}
