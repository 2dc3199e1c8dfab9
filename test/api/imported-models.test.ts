import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminCommand } from '../../src/admin/commands.js';
import type { ApiService } from '../../src/api/service.js';
import { bearer, startTestApi } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * A catalog file imported while API processes run: they reload on `catalog_changed`, as they do
 * for a price edited in the database, and offer a model only when they have its provider's key.
 */
describe('models imported from a catalog file, seen by running API processes', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });
  /** A second API process on the same database, with a fal key (never used: nothing is sent to fal). */
  let withFalKey: ApiService;
  let dir: string;
  beforeAll(async () => {
    withFalKey = await startTestApi(stack.db.url, { FAL_KEY: 'fal-key-for-listing-only' });
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
  });
  afterAll(async () => {
    await withFalKey?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const get = async (api: ApiService, url: string) =>
    (await api.app.inject({ method: 'GET', url, headers: bearer(stack.account.key) })).json();
  const modelIds = async (api: ApiService) =>
    ((await get(api, '/v1/models')).data as Array<{ id: string }>).map((m) => m.id);
  const importFile = async (name: string, models: unknown[]) => {
    const path = join(dir, name);
    await writeFile(path, JSON.stringify({ models }));
    return runAdminCommand(['import-catalog', path], stack.db.pool);
  };

  it('offers a simulated model at once and runs it; a fal model only where FAL_KEY is set', async () => {
    const { models } = JSON.parse(await readFile('catalog/examples/simulated.json', 'utf8')) as {
      models: [{ id: string; definition: Record<string, any> }];
    };
    const sketch = models[0];
    const onFal = {
      id: 'fal-sketch',
      sort_order: 110,
      definition: {
        ...sketch.definition,
        name: 'Sketch on fal',
        provider: {
          name: 'fal',
          model: 'fal-ai/flux/dev',
          input: { prompt: { from: 'prompt' }, num_images: { value: 1 } },
        },
      },
    };
    for (const api of [stack.api, withFalKey]) expect(await modelIds(api)).not.toContain(sketch.id);

    await importFile('models.json', [sketch, onFal]);
    await expect.poll(() => modelIds(stack.api), { timeout: 5000 }).toContain('sketch-1');
    expect(await modelIds(stack.api)).not.toContain('fal-sketch');
    await expect
      .poll(() => modelIds(withFalKey), { timeout: 5000 })
      .toEqual(expect.arrayContaining(['sketch-1', 'fal-sketch']));

    // Without FAL_KEY the fal model is unknown: refused at once, nothing charged.
    const balance = await get(stack.api, '/v1/credits');
    const refused = await createGeneration(stack.api, stack.account.key, {
      model: 'fal-sketch',
      prompt: 'a harbour',
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().issues).toEqual([
      expect.objectContaining({
        field: 'model',
        code: 'invalid_value',
        message: expect.stringMatching(/^Unknown model/),
      }),
    ]);
    expect(await get(stack.api, '/v1/credits')).toEqual(balance);

    // The simulated model runs end to end at the size and price its entry gives.
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'sketch-1',
      prompt: 'a harbour at dawn',
      size: 'large',
      aspect_ratio: '16:9',
    });
    expect(created.statusCode).toBe(202);
    expect(created.json().credits).toBe(2);
    const done = await pollGeneration(stack.api, stack.account.key, created.json().id as string);
    expect(done).toMatchObject({ status: 'succeeded', output: { images: [{ width: 1536, height: 864 }] } });

    // A price changed by a later import is served without a restart.
    sketch.definition.pricing.credits.large = 5;
    expect((await importFile('prices.json', [sketch])).json).toMatchObject({ updated: ['sketch-1'] });
    await expect
      .poll(
        async () =>
          ((await get(stack.api, '/v1/models')).data as Array<{ id: string; pricing: any }>).find(
            (m) => m.id === 'sketch-1',
          )?.pricing.credits.large,
        { timeout: 5000 },
      )
      .toBe(5);
  });
});
