import { beforeAll, describe, expect, it } from 'vitest';
import type { Provider } from '../../src/providers/provider.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { activeRunHistory, activitiesOf } from '../support/workflow-runs.js';

/**
 * POST hands the job to the provider before answering, but never waits on a provider that does
 * not answer: after PROVIDER_SUBMIT_TIMEOUT_MS it answers queued, and submission goes on in the
 * background. The create still waiting for its answer is never sent a second time meanwhile: later
 * attempts wait for it to end (here, after 1.5 s, without having reached the provider).
 */
describe('a provider too slow to accept within the POST', () => {
  let submitCalls = 0;
  let simulated: SimulatedProvider;
  const unresponsive: Provider = {
    submit: async (job) => {
      if (++submitCalls === 1) {
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        throw new Error('connection reset before the request was sent');
      }
      return simulated.submit(job);
    },
    status: (jobId) => simulated.status(jobId),
    fetchResult: (jobId, index) => simulated.fetchResult(jobId, index),
    lookup: (token) => simulated.lookup(token),
    cancel: () => simulated.cancel(),
  };
  const stack = useGenerationStack({
    worker: { overrides: { providerFor: () => unresponsive } },
    apiEnv: { PROVIDER_SUBMIT_TIMEOUT_MS: '300' },
    account: { oneTime: 100 },
  });
  beforeAll(() => {
    simulated = new SimulatedProvider(stack.db.pool, { delayMs: 100 });
  });

  it('answers 202 queued while the provider is silent, then submits once in the background and succeeds', async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'patience',
    });
    expect(response.statusCode).toBe(202);
    const created = response.json();
    expect(created).toMatchObject({ status: 'queued', credits: 2, credits_refunded: false });
    // The POST's second attempt found the first still waiting for an answer and did not send again.
    expect(submitCalls).toBe(1);

    expect(await pollGeneration(stack.api, stack.account.key, created.id)).toMatchObject({
      status: 'succeeded',
    });
    expect(submitCalls).toBe(2);
    expect(await chargesOf(stack.db.pool, created.id)).toEqual({
      debits: 1,
      refunds: 0,
      net: -2,
      submissions: 1,
    });
    const history = await activeRunHistory(stack.client, await workflowIdOf(stack.db.pool, created.id));
    const scheduled = activitiesOf(history)
      .filter(({ local, name }) => !local || name === 'readProviderJob')
      .map(({ name }) => name);
    // The background submission is an activity of its own (the ones inside the POST are local
    // markers); the job is read (as often as it takes: this provider pushes nothing); the
    // gallery's thumbnails are not the generation's (a sweep makes them).
    expect([...new Set(scheduled)]).toEqual(['submit', 'readProviderJob', 'persistResults']);
  });
});
