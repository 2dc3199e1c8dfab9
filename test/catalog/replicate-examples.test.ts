import { describe, expect, it } from 'vitest';
import { resolveOptions } from '../../src/catalog/pricing.js';
import { buildProviderInput } from '../../src/catalog/provider-mapping.js';
import { exampleCatalog } from '../support/example-catalog.js';

/**
 * catalog/examples/replicate.json: every entry is a valid catalog entry, and a request becomes the
 * input Replicate documents for the model (field names and values from each model's API page).
 */
describe('the Replicate example catalog', () => {
  const inputFor = async (id: string, request: Record<string, unknown>) => {
    const model = (await exampleCatalog('replicate')).find((m) => m.id === id)!;
    const options = resolveOptions({ id, ...model.definition }, request);
    const images = (request.images as string[] | undefined) ?? [];
    return {
      provider: model.definition.provider!,
      input: buildProviderInput(model.definition.provider!, {
        prompt: String(request.prompt),
        images,
        options,
      }),
    };
  };

  it('parses, and every entry runs on Replicate', async () => {
    const models = await exampleCatalog('replicate');
    expect(models.map((m) => [m.id, m.definition.provider?.name, m.definition.provider?.model])).toEqual([
      ['replicate-flux-schnell', 'replicate', 'black-forest-labs/flux-schnell'],
      ['replicate-flux-1.1-pro', 'replicate', 'black-forest-labs/flux-1.1-pro'],
      ['replicate-flux-kontext-pro', 'replicate', 'black-forest-labs/flux-kontext-pro'],
      ['replicate-kling-v3-video', 'replicate', 'kwaivgi/kling-v3-video'],
    ]);
  });

  it('maps requests onto each model’s documented input', async () => {
    expect(
      (await inputFor('replicate-flux-schnell', { prompt: 'a fox', output_format: 'jpeg' })).input,
    ).toEqual({
      prompt: 'a fox',
      aspect_ratio: '1:1',
      megapixels: '1',
      output_format: 'jpg',
      num_outputs: 1,
    });
    expect(
      (await inputFor('replicate-flux-1.1-pro', { prompt: 'a fox', aspect_ratio: '3:2' })).input,
    ).toEqual({
      prompt: 'a fox',
      aspect_ratio: '3:2',
      output_format: 'png',
      prompt_upsampling: false,
      safety_tolerance: 2,
    });
    expect(
      (
        await inputFor('replicate-flux-kontext-pro', {
          prompt: 'watercolour',
          images: ['https://x.test/a.png'],
        })
      ).input,
    ).toEqual({
      prompt: 'watercolour',
      input_image: 'https://x.test/a.png',
      aspect_ratio: 'match_input_image',
      output_format: 'png',
      safety_tolerance: 2,
    });
    const kling = await inputFor('replicate-kling-v3-video', {
      prompt: 'waves',
      first_frame_image: 'https://x.test/first.png',
      last_frame_image: 'https://x.test/last.png',
      resolution: '1080p',
      duration: 10,
      generate_audio: true,
    });
    expect(kling.provider.version).toMatch(/^[0-9a-f]{64}$/);
    expect(kling.input).toEqual({
      prompt: 'waves',
      start_image: 'https://x.test/first.png',
      end_image: 'https://x.test/last.png',
      aspect_ratio: '16:9',
      mode: 'pro',
      duration: 10,
      generate_audio: true,
    });
  });
});
