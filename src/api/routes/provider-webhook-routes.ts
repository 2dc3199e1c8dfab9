import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { isGrpcServiceError, type WorkflowSignalInput } from '@temporalio/client';
import { composeInterceptors } from '@temporalio/common/lib/interceptors.js';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { ProviderName } from '../../catalog/provider-mapping.js';
import { providerWaitOf } from '../../db/generation-workflows.js';
import { ApiError } from '../../vocabulary/errors.js';
import type { ProviderWebhookMetrics, ProviderWebhookOutcome } from '../../observability/metrics.js';
import { parseJobReference } from '../../providers/job-reference.js';
import { providerWebhookRoute } from '../../providers/provider-push.js';
import { PushKeysUnavailable, type PushVerifier } from '../../providers/provider-webhooks.js';
import { providerJobEndedSignal } from '../../workflows/generation-messages.js';
import type { ProviderJobEnded } from '../../workflows/generation-types.js';

export interface ProviderWebhookDeps {
  db: CommonQueryMethods;
  temporal: Client;
  /** The providers whose pushes this API takes (those configured here), each with its verification. */
  verifiers: ReadonlyMap<ProviderName, PushVerifier>;
  /** How long the signal to the workflow may take before the delivery is answered 503 (ADMISSION_TIMEOUT_MS). */
  timeoutMs: number;
  log: FastifyBaseLogger;
  metrics?: ProviderWebhookMetrics;
}

/** A delivery's largest body: a prediction or a fal result names its files by URL, far below this. */
export const providerWebhookBodyLimit = 1024 * 1024;

/** gRPC's NOT_FOUND: the workflow id has no run that is open (the generation's workflow has ended). */
const grpcNotFound = 5;

/**
 * POST /provider-webhooks/{provider}/{generationId}: a provider pushes the end of a job (see
 * provider-push.ts). No API key: the provider's signature over the raw body is the authentication,
 * so the route is public (never counted as a failed authentication, never held to a key's rate
 * limit, never in a customer's request log) and takes any content type as bytes.
 *
 * - a provider this API takes no pushes from: 404;
 * - not verified (signature, timestamp): 401 in the error envelope, nothing changes; the provider's
 *   keys not to be had now: 503 (the provider sends it again);
 * - verified, for no generation of ours or for another job than the one it recorded: 200 and a
 *   warning (the provider stops sending it); for a generation that has recorded no job yet: 503;
 * - verified, for a generation no longer waiting on that job (ended, in review): 200, late;
 * - otherwise its workflow is signalled (providerJobEndedSignal), 200; Temporal not reachable: 503.
 * The signal carries a request id derived from the generation and its job, so Temporal records
 * one signal however many times the job's end is delivered (a duplicate, a provider's retry).
 */
export function providerWebhookRoutes(app: FastifyInstance, deps: ProviderWebhookDeps): void {
  void app.register((scope, _options, done) => {
    // The signature covers the bytes as sent: the body is kept as it came, whatever its type says.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: providerWebhookBodyLimit },
      (_request, body, parsed) => parsed(null, body),
    );
    scope.post<{ Params: { provider: string; generationId: string } }>(
      providerWebhookRoute,
      { config: { public: true, checksOwnBody: true }, bodyLimit: providerWebhookBodyLimit },
      async (request, reply) => {
        const { provider, generationId } = request.params;
        const verifier = deps.verifiers.get(provider as ProviderName);
        if (!verifier) throw new ApiError('not_found', `This service takes no webhooks from ${provider}.`);
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const outcome = await handle(deps, {
          provider: provider as ProviderName,
          generationId,
          verifier,
          headers: request.headers,
          body,
          requestId: request.id,
        });
        deps.metrics?.count(provider, outcome);
        return reply.code(200).send({ received: true });
      },
    );
    done();
  });
}

interface Delivery {
  provider: ProviderName;
  generationId: string;
  verifier: PushVerifier;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: Buffer;
  requestId: string;
}

/** Verifies a delivery and wakes its generation: the outcome of a 200, or the ApiError of any other answer. */
async function handle(deps: ProviderWebhookDeps, delivery: Delivery): Promise<ProviderWebhookOutcome> {
  const { provider, generationId, requestId } = delivery;
  const count = (outcome: ProviderWebhookOutcome) => deps.metrics?.count(provider, outcome);
  const about = { provider, generationId, request_id: requestId };
  count('received');
  let verdict;
  try {
    verdict = await delivery.verifier.verify(delivery.headers, delivery.body);
  } catch (error) {
    if (!(error instanceof PushKeysUnavailable)) throw error;
    deps.log.warn(
      { ...about, err: error },
      'a provider webhook could not be verified: its keys cannot be had',
    );
    throw new ApiError(
      'service_unavailable',
      'The provider’s signing keys cannot be had now; send it again.',
      {
        retryAfterSeconds: 5,
      },
    );
  }
  if (!verdict.verified) {
    count('refused');
    deps.log.warn({ ...about, reason: verdict.reason }, 'a provider webhook was refused');
    throw new ApiError('unauthorized', `The delivery could not be verified: ${verdict.reason}.`);
  }
  count('verified');
  const pushedJob = verdict.jobId;
  const generation = await providerWaitOf(deps.db, generationId);
  const recorded = generation?.provider_job_id ? parseJobReference(generation.provider_job_id) : null;
  if (generation && !recorded && generation.status === 'queued' && !generation.needs_review) {
    // Its create's answer is being recorded (a job that ended at once): the provider is to send it again.
    deps.log.info({ ...about, pushedJob }, 'a provider webhook came before its generation recorded the job');
    count('early');
    throw new ApiError(
      'service_unavailable',
      'This generation has not recorded its job yet; send it again.',
      {
        retryAfterSeconds: 5,
      },
    );
  }
  if (
    !generation ||
    !recorded ||
    recorded.provider !== provider ||
    !delivery.verifier.isJob(recorded.jobId, pushedJob)
  ) {
    // Answered 200 so that the provider stops: nothing here waits for it. Support may want the job.
    deps.log.warn(
      { ...about, pushedJob, recordedJob: generation?.provider_job_id ?? null, known: generation !== null },
      generation
        ? 'a provider webhook names another job than the one its generation recorded'
        : 'a provider webhook names a generation this service does not have',
    );
    return 'unknown';
  }
  if (generation.status !== 'queued' || generation.needs_review || !generation.workflow_id) {
    deps.log.info(
      { ...about, status: generation.status, needsReview: generation.needs_review },
      'a provider webhook came late',
    );
    return 'late';
  }
  const ended: ProviderJobEnded = { generationId, jobId: generation.provider_job_id! };
  try {
    await signalJobEnded(deps, generation.workflow_id, ended);
  } catch (error) {
    // The generation's workflow has ended since the read: it waits for nothing.
    if (isGrpcServiceError(error) && Number(error.code) === grpcNotFound) return 'late';
    deps.log.warn({ ...about, err: error }, 'a provider webhook could not wake its generation');
    throw new ApiError('service_unavailable', 'The generation could not be reached now; send it again.', {
      retryAfterSeconds: 5,
      cause: error,
    });
  }
  return 'signaled';
}

/**
 * Signals the workflow (its current run) that the job ended. Sent through the workflow service
 * rather than a handle, for its request id: one per generation and job, so that Temporal records a
 * second delivery of the same end as the signal it already has (no second event, no second wake).
 * It still passes through the client's workflow interceptors, as a handle's signal would: with
 * tracing on, the delivery's trace goes on into the workflow (a `SignalWorkflow:providerJobEnded`
 * span, its context in the signal's headers).
 */
async function signalJobEnded(deps: ProviderWebhookDeps, workflowId: string, ended: ProviderJobEnded) {
  const { temporal } = deps;
  const requestId = createHash('sha256')
    .update(`providerJobEnded\n${ended.generationId}\n${ended.jobId}`)
    .digest('hex');
  const send = async (input: WorkflowSignalInput): Promise<void> => {
    await temporal.connection.withDeadline(Date.now() + deps.timeoutMs, () =>
      temporal.workflowService.signalWorkflowExecution({
        namespace: temporal.options.namespace,
        workflowExecution: input.workflowExecution,
        signalName: input.signalName,
        header: { fields: input.headers },
        // The default converter, as every client of this service uses (no codec is configured).
        input: {
          payloads: input.args.map((arg) =>
            temporal.options.loadedDataConverter.payloadConverter.toPayload(arg),
          ),
        },
        identity: temporal.options.identity,
        requestId,
      }),
    );
  };
  // Composed as the client composes a handle's signal (this service configures them as a list).
  const configured = temporal.options.interceptors.workflow;
  const signal = composeInterceptors(Array.isArray(configured) ? configured : [], 'signal', send);
  await signal({
    signalName: providerJobEndedSignal.name,
    args: [ended],
    workflowExecution: { workflowId },
    headers: {},
  });
}
