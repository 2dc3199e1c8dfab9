import { sql } from 'slonik';
import { afterAll, beforeAll, expect } from 'vitest';
import { z } from 'zod';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { promptContains } from '../support/providers/fake-http.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import type { GenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { offerExampleModels, workerProviders } from '../support/worker-providers.js';

export interface ProviderStandIns {
  fal: FalQueueServer;
  replicate: ReplicateServer;
}

/**
 * The Replicate and fal stand-ins, started before the stack (call it before useGenerationStack):
 * their variables go into `apiEnv`, as the API offers a provider's models only when configured.
 */
export function useProviderStandIns(apiEnv: Record<string, string>): ProviderStandIns {
  const standIns = {} as ProviderStandIns;
  beforeAll(async () => {
    standIns.fal = await FalQueueServer.start({ key: `fal-key-${randomBase62(12)}` });
    standIns.replicate = await ReplicateServer.start({ token: `r8_${randomBase62(20)}` });
    Object.assign(apiEnv, standIns.fal.env(), standIns.replicate.env());
  });
  afterAll(async () => {
    await Promise.all([standIns.fal?.close(), standIns.replicate?.close()]);
  });
  return standIns;
}

/**
 * The cancel stories whose provider changes state between our read and our cancel (issue 27 §2),
 * told through the API against the Replicate and fal protocol stand-ins, as
 * test/generations/cancel-race.test.ts tells them. `record(generationId, story)` saves the runs.
 * The stack's worker keeps its simulated provider for the other stories.
 */
export async function tellProviderCancelStories(
  stack: GenerationStack,
  { fal, replicate }: ProviderStandIns,
  record: (generationId: string, story: string) => Promise<void>,
): Promise<void> {
  const simulated = stack.worker.deps.providerFor;
  try {
    const fakes = workerProviders(stack, { ...fal.env(), ...replicate.env() });
    stack.worker.deps.providerFor = (name) => (name === 'simulated' ? simulated(name) : fakes(name));
    await offerExampleModels(
      stack,
      ['catalog/examples/fal.json', 'catalog/examples/replicate.json', 'catalog/examples/routed.json'],
      ['fal-flux-schnell', 'replicate-flux-schnell', 'flux-schnell'],
    );
    const create = async (model: string, prompt: string, extra: Record<string, unknown> = {}) => {
      const response = await createGeneration(stack.api, stack.account.key, { model, prompt, ...extra });
      expect(response.statusCode, response.body).toBe(202);
      const id = response.json<{ id: string }>().id;
      // Handed over: the provider holds the job (the POST may answer before its id is written).
      await waitFor(
        () =>
          stack.db.pool.maybeOneFirst(sql.type(z.object({ provider_job_id: z.string().nullable() }))`
            SELECT provider_job_id FROM generations WHERE id = ${id}`),
        30_000,
      );
      return id;
    };
    const cancel = (id: string) =>
      stack.api.app.inject({
        method: 'POST',
        url: `/v1/generations/${id}/cancel`,
        headers: bearer(stack.account.key),
      });

    // Replicate started the prediction between our read and our cancel: canceled, the debit kept.
    const charged = 'recorded cancel, replicate starts it';
    replicate.script({ pollsStarting: 1_000_000 }, promptContains(charged));
    const chargedId = await create('replicate-flux-schnell', charged);
    const prediction = replicate.accepted().find((p) => p.input.prompt === charged)!;
    replicate.beforeCancel = (id) => id === prediction.id && replicate.startNow(id);
    const chargedAnswer = await cancel(chargedId);
    replicate.beforeCancel = undefined;
    expect(chargedAnswer.json()).toMatchObject({ status: 'failed', credits_refunded: false });
    await record(chargedId, 'cancel of a job the provider started as we canceled: canceled, charged');

    // fal answered CANCELLATION_REQUESTED (unknown): the runner that took it stopped, no output.
    const stopped = 'recorded cancel, fal runner stops';
    fal.script({ pollsInQueue: 1_000_000, hold: true }, promptContains(stopped));
    const stoppedId = await create('fal-flux-schnell', stopped);
    const stoppedJob = fal.accepted().find((j) => j.input.prompt === stopped)!;
    fal.beforeCancel = (id) => id === stoppedJob.id && fal.pickUp(id);
    const stoppedAnswer = await cancel(stoppedId);
    fal.beforeCancel = undefined;
    expect(stoppedAnswer.json()).toMatchObject({ status: 'failed', credits_refunded: true });
    await record(stoppedId, 'cancel answered unknown, the job then ended without output: canceled, refunded');

    // fal answered CANCELLATION_REQUESTED, and its runner ran the request to its end: 409, succeeded.
    const ranOn = 'recorded cancel, fal runner runs on';
    fal.script({ pollsInQueue: 1_000_000, hold: true, ignoresCancel: true }, promptContains(ranOn));
    const ranOnId = await create('fal-flux-schnell', ranOn);
    const ranOnJob = fal.accepted().find((j) => j.input.prompt === ranOn)!;
    fal.beforeCancel = (id) => id === ranOnJob.id && fal.pickUp(id);
    const answered = cancel(ranOnId);
    await waitFor(() =>
      Promise.resolve(fal.accepted().find((j) => j.id === ranOnJob.id)?.cancelIgnored || null),
    );
    fal.release(ranOnJob.id);
    fal.beforeCancel = undefined;
    expect((await answered).statusCode).toBe(409);
    await pollGeneration(stack.api, stack.account.key, ranOnId, (g) => g.status === 'succeeded');
    await record(ranOnId, 'cancel answered unknown, the job then delivered: not cancelable, succeeded');

    // Routes (issue 29): fal refuses the create (503, not accepted), Replicate serves it.
    const refused = 'recorded failover, fal refuses';
    fal.failCreate({ kind: 'status', status: 503 }, promptContains(refused));
    const refusedId = await create('flux-schnell', refused);
    await pollGeneration(stack.api, stack.account.key, refusedId, (g) => g.status === 'succeeded');
    await record(refusedId, 'fal refuses the create: the next route (Replicate) serves it');

    // Replicate reports its prediction aborted before it started (no started_at): the route's end
    // is recorded (leaveRoute) and the next route (fal) serves it, as routed-failover.test.ts tells it.
    const aborted = 'recorded failover, replicate aborts';
    replicate.script({ pollsStarting: 1, pollsProcessing: 0, final: 'aborted' }, promptContains(aborted));
    const abortedId = await create('flux-schnell', aborted, { provider: { order: ['replicate'] } });
    expect(
      await pollGeneration(stack.api, stack.account.key, abortedId, (g) => g.status === 'succeeded'),
    ).toMatchObject({ provider: 'fal' });
    await record(
      abortedId,
      'Replicate reports its job aborted before it started: the next route (fal) serves it',
    );
  } finally {
    stack.worker.deps.providerFor = simulated;
  }
}
