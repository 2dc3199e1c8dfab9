/**
 * The Temporal seam, checked by the compiler. Not a test vitest runs: `npm run typecheck`
 * (`tsc --noEmit -p .`, whose project includes test/) compiles it. Each `@ts-expect-error` below is
 * a contract drift that one side makes and the other does not follow; the compiler must refuse it,
 * and if it ever stops refusing one (a factory no longer typed by its contract, a workflow proxying
 * an untyped activity), the unused directive is itself an error (TS2578) and the typecheck fails.
 * The `Same` lines fail the same way when a factory stops returning its declared contract.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { ActivityDeps } from '../../src/activities/activity-deps.js';
import type { createCancelActivities } from '../../src/activities/cancel-activities.js';
import type { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { createActivities } from '../../src/activities/index.js';
import type { createPruningActivities } from '../../src/activities/pruning-activities.js';
import type { createReconciliationActivities } from '../../src/activities/reconciliation-activities.js';
import type { createThumbnailActivities } from '../../src/activities/thumbnail-activities.js';
import { createWebhookActivities } from '../../src/activities/webhook-activities.js';
import type { StoredOutput } from '../../src/db/generation-results.js';
import type { ProviderJobEnd } from '../../src/vocabulary/generation.js';
import type { ProviderResult, ProviderStatus } from '../../src/providers/provider.js';
import type { WorkflowActivities } from '../../src/workflows/activity-contracts.js';
import type { CancelActivities, GenerationActivities } from '../../src/workflows/contracts/generation.js';
import type { PruningActivities } from '../../src/workflows/contracts/pruning.js';
import type { ReconciliationActivities } from '../../src/workflows/contracts/reconciliation.js';
import type { ThumbnailActivities } from '../../src/workflows/contracts/thumbnails.js';
import type {
  WebhookActivities,
  WebhookAttempt,
  WebhookAttemptOutcome,
} from '../../src/workflows/contracts/webhook-delivery.js';

/** True only when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// Every activity factory returns its workflow's declared contract.
export const factoriesReturnTheirContracts: [
  Same<ReturnType<typeof createGenerationActivities>, GenerationActivities<ProviderResult, StoredOutput>>,
  Same<ReturnType<typeof createCancelActivities>, CancelActivities>,
  Same<ReturnType<typeof createWebhookActivities>, WebhookActivities>,
  Same<ReturnType<typeof createPruningActivities>, PruningActivities>,
  Same<ReturnType<typeof createReconciliationActivities>, ReconciliationActivities>,
  Same<ReturnType<typeof createThumbnailActivities>, ThumbnailActivities>,
] = [true, true, true, true, true, true];

// A finished provider job is one type: what an adapter reports is what a read of the job returns.
export const oneJobEnd: [
  Same<Exclude<ProviderStatus, { state: 'running' }>, ProviderJobEnd<ProviderResult>>,
  Same<
    Exclude<Awaited<ReturnType<GenerationActivities['readProviderJob']>>, { state: 'running' }>,
    ProviderJobEnd<unknown>
  >,
] = [true, true];

type Contract = WorkflowActivities<ProviderResult, StoredOutput>;
type Replaced<T, K extends keyof T, V> = Omit<T, K> & { [P in K]: V };

/** The worker's side: implementations against contracts that changed without them. */
export function implementationsFollowContracts(deps: ActivityDeps) {
  // What the worker registers is what the workflows proxy.
  void (createActivities(deps) satisfies Contract);

  // A workflow declares an activity nobody implements.
  // @ts-expect-error -- sendReceipt is missing from the worker's activities
  void (createActivities(deps) satisfies Contract & { sendReceipt: (id: string) => Promise<void> });

  // An implementation without one of its contract's activities.
  const { nextWebhookEvents: _dropped, ...withoutLook } = createWebhookActivities(deps);
  // @ts-expect-error -- nextWebhookEvents is missing
  void (withoutLook satisfies WebhookActivities);

  // The contract's argument changed (seq became a string): the implementation takes a number.
  type SeqAsText = (input: {
    generationId: string;
    seq: string;
    attempt: number;
  }) => Promise<WebhookAttemptOutcome>;
  // @ts-expect-error -- the implementation does not accept this argument
  void (createWebhookActivities(deps) satisfies Replaced<WebhookActivities, 'deliverWebhook', SeqAsText>);

  // The contract's answer gained a field the implementation does not give.
  type Timed = (input: WebhookAttempt) => Promise<WebhookAttemptOutcome & { latencyMs: number }>;
  // @ts-expect-error -- the implementation's answer has no latencyMs
  void (createWebhookActivities(deps) satisfies Replaced<WebhookActivities, 'deliverWebhook', Timed>);
}

/** The workflows' side: a proxy called with what its contract does not take. Never run. */
export async function workflowsFollowContracts() {
  const { deliverWebhook } = proxyActivities<WebhookActivities>({ startToCloseTimeout: '30 seconds' });
  await deliverWebhook({ generationId: 'gen_1', seq: 1, attempt: 1 });
  // @ts-expect-error -- a scheduled attempt names its number
  await deliverWebhook({ generationId: 'gen_1', seq: 1 });

  const { readProviderJob, refund } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '1 minute',
  });
  // @ts-expect-error -- a read says why it is made: pushed, fallback or poll
  await readProviderJob({ model: 'm', jobId: 'sim:1' }, 'timer');
  // @ts-expect-error -- a refund names the error it records
  await refund('gen_1');
  const read = await readProviderJob({ model: 'm', jobId: 'sim:1' }, 'poll');
  // @ts-expect-error -- a job read is running, succeeded or failed, never anything else
  if (read.state === 'queued') return;
}
