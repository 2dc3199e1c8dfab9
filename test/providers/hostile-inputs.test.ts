import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ProviderName } from '../../src/catalog/provider-mapping.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { OpenAiImagesProvider } from '../../src/providers/openai/openai-images-provider.js';
import type { Provider, ProviderJob } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { OpenAiImagesServer } from '../support/providers/openai-images-server.js';
import { useGenerationStack } from '../support/stack.js';
import { offerExampleModels, workerProviders } from '../support/worker-providers.js';

/**
 * A hostile client against the provider edge: requests built to exhaust a worker's memory or to
 * take a provider down for everyone, and what they get instead (a refund, nothing more).
 */
describe('hostile inputs at the provider edge', () => {
  const key = `sk-proj-${randomBase62(40)}`;
  let openai: OpenAiImagesServer;
  const apiEnv: Record<string, string> = {};
  let providerFor: (name: ProviderName) => Provider;
  beforeAll(async () => {
    openai = await OpenAiImagesServer.start({ key });
    Object.assign(apiEnv, openai.env());
  });
  afterAll(() => openai?.close());
  const stack = useGenerationStack({
    apiEnv,
    worker: { overrides: { providerFor: (name) => providerFor(name) } },
  });
  beforeAll(async () => {
    providerFor = workerProviders(stack, openai.env());
    await offerExampleModels(stack, ['catalog/examples/openai.json'], ['openai-gpt-image-1']);
  });

  it('seven edits naming hosts that do not resolve are refunded at once; OpenAI stays up for another account', async () => {
    const ids = await Promise.all(
      Array.from({ length: 7 }, async (_, i) => {
        const response = await createGeneration(stack.api, stack.account.key, {
          model: 'openai-gpt-image-1',
          prompt: `attack ${i}`,
          images: [`https://no-such-host-${i}.invalid/a.png`],
        });
        expect(response.statusCode, response.body).toBe(202);
        return response.json<{ id: string }>().id;
      }),
    );
    for (const id of ids)
      expect(await pollGeneration(stack.api, stack.account.key, id, undefined, 60_000)).toMatchObject({
        status: 'failed',
        credits_refunded: true,
        error: { code: 'provider_rejected' },
      });
    expect(openai.creates).toBe(0);
    const health = await stack.db.pool.maybeOne(
      sql.type(z.object({ consecutive_failures: z.number() }))`
        SELECT consecutive_failures FROM provider_health WHERE provider = 'openai'`,
    );
    expect(health?.consecutive_failures ?? 0).toBe(0);

    const other = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const response = await createGeneration(stack.api, other.key, {
      model: 'openai-gpt-image-1',
      prompt: 'an honest lighthouse',
    });
    expect(response.statusCode, response.body).toBe(202);
    expect(
      await pollGeneration(stack.api, other.key, response.json<{ id: string }>().id, undefined, 60_000),
    ).toMatchObject({ status: 'succeeded' });
  });

  it('our own large video named as every reference image, ten requests at once: refused unread, memory flat', async () => {
    // The wait's OpenAI call, as the worker makes it, on a result host whose URLs the API accepts.
    const storage = new LocalStorage(stack.worker.storageDir, 'https://results.example.test');
    const video = await storage.put(
      `r${randomBase62(20)}`,
      'output-0.mp4',
      Buffer.alloc(24 * 1024 * 1024, 1),
    );
    const adapter = new OpenAiImagesProvider(stack.db.pool, {
      apiKey: key,
      baseUrl: openai.env().OPENAI_BASE_URL!,
      storage,
      download: { allowCidrs: ['127.0.0.1/32'], allowHttp: true },
    });
    const job = (i: number): ProviderJob => ({
      token: `tok_gen_${randomBase62(12)}`,
      model: 'openai-gpt-image-1',
      mediaType: 'image',
      prompt: `x ${i}`,
      options: {},
      images: Array(16).fill(video) as string[],
      longEdgePx: 1024,
      target: {
        model: 'gpt-image-1',
        input: { prompt: `x ${i}`, image: Array(16).fill(video) },
        referenceFields: ['image'],
      },
    });
    const before = openai.creates;
    global.gc?.();
    const baseline = process.memoryUsage.rss();
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => adapter.status((await adapter.submit(job(i))).jobId)),
    );
    clearInterval(sampler);
    for (const outcome of outcomes) expect(outcome).toMatchObject({ state: 'failed', rejected: true });
    expect(openai.creates).toBe(before);
    const growthMb = (peak - baseline) / 1024 / 1024;
    console.log(`worker RSS growth under the attack: ${growthMb.toFixed(1)} MB`);
    // Read whole, 16 × 10 reads of 24 MiB would be gigabytes; refused by name and size, nothing is read.
    expect(growthMb).toBeLessThan(64);
  });
});
