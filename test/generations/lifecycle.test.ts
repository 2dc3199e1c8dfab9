import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { generationSchema } from '../../src/api/schemas.js';
import { bearer } from '../support/api.js';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, galleryOf } from '../support/ledger.js';

describe('a generation from POST to succeeded', () => {
  const stack = useGenerationStack({ account: { subscription: 3, oneTime: 20 } });

  it('202 with a queued generation, debited subscription-first, then succeeded with a real image at a stable URL', async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-pro',
      prompt: 'a lighthouse at night',
      aspect_ratio: '16:9',
    });
    expect(response.statusCode).toBe(202);
    const created = generationSchema.parse(response.json());
    expect(response.headers['x-request-id']).toBe(created.id);
    expect(created).toMatchObject({
      status: 'queued',
      model: 'lumen-pro',
      media_type: 'image',
      credits: 4,
      credits_refunded: false,
      output: null,
      error: null,
    });
    expect(created.input).toEqual({ prompt: 'a lighthouse at night', aspect_ratio: '16:9' });
    const balance = (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json();
    expect(balance).toEqual({ credits: 19, subscription_credits: 0, one_time_credits: 19 });
    // Creating a generation hands it to the provider: the provider has the job by the time of the 202.
    expect(await chargesOf(stack.db.pool, created.id)).toEqual({
      debits: 1,
      refunds: 0,
      net: -4,
      submissions: 1,
    });

    const done = generationSchema.parse(await pollGeneration(stack.api, stack.account.key, created.id));
    expect(done.status).toBe('succeeded');
    const image = done.output!.images![0]!;
    expect(image).toMatchObject({ width: 1024, height: 576 });
    expect(image.url.startsWith(stack.worker.resultBaseUrl)).toBe(true);
    expect(Date.parse(done.expires_at!) - Date.parse(done.completed_at!)).toBeCloseTo(
      30 * 24 * 3600 * 1000,
      -4,
    );
    const download = await fetch(image.url);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    const metadata = await sharp(Buffer.from(await download.arrayBuffer())).metadata();
    expect(metadata).toMatchObject({ format: 'png', width: 1024, height: 576 });
    expect(await galleryOf(stack.db.pool, created.id)).toEqual([
      { account_id: stack.account.accountId, url: image.url, width: 1024, height: 576 },
    ]);
  });
});
