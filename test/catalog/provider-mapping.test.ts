import { describe, expect, it } from 'vitest';
import { modelDefinitionSchema, type ModelDefinition } from '../../src/catalog/catalog-entry.js';
import { buildProviderInput } from '../../src/catalog/provider-mapping.js';
import { defaultCatalog } from '../../src/catalog/default-catalog.js';

/** A seeded model with a provider block: how our request becomes the provider's input. */
function withProvider(provider: unknown): unknown {
  const lumenPro = defaultCatalog.find((model) => model.id === 'lumen-pro')!.definition;
  return { ...lumenPro, provider } satisfies Omit<ModelDefinition, 'provider'> & { provider: unknown };
}

const sizes = {
  '1K': 'square_hd',
  '2K': { width: 2048, height: 2048 },
  '4K': { width: 4096, height: 4096 },
};

describe('a catalog entry’s provider mapping', () => {
  it('builds the provider’s input from constants, the prompt, images and several options', () => {
    const block = {
      name: 'fal',
      model: 'fal-ai/flux/dev',
      input: {
        prompt: { from: 'prompt' },
        image_size: {
          from: ['aspect_ratio', 'resolution'],
          map: Object.fromEntries(
            ['1:1', '3:2', '2:3', '4:3', '3:4', '4:5', '5:4', '16:9', '9:16', '21:9', 'auto'].flatMap(
              (ratio) => Object.entries(sizes).map(([resolution, size]) => [`${ratio},${resolution}`, size]),
            ),
          ),
        },
        image_url: { from: 'images', first: true },
        image_urls: { from: 'images' },
        num_images: { value: 1 },
      },
    };
    const parsed = modelDefinitionSchema.parse(withProvider(block));
    const input = buildProviderInput(parsed.provider!, {
      prompt: 'a lighthouse',
      images: ['https://example.com/a.png', 'https://example.com/b.png'],
      options: { aspect_ratio: '16:9', resolution: '2K' },
    });
    expect(input).toEqual({
      prompt: 'a lighthouse',
      image_size: { width: 2048, height: 2048 },
      image_url: 'https://example.com/a.png',
      image_urls: ['https://example.com/a.png', 'https://example.com/b.png'],
      num_images: 1,
    });
    // No reference images: the image fields are left out, not sent empty.
    expect(
      buildProviderInput(parsed.provider!, {
        prompt: 'p',
        images: [],
        options: { aspect_ratio: '1:1', resolution: '1K' },
      }),
    ).toEqual({ prompt: 'p', image_size: 'square_hd', num_images: 1 });
  });

  it('refuses a mapping that names an option the entry does not define, or misses a value', () => {
    const result = modelDefinitionSchema.safeParse(
      withProvider({
        name: 'replicate',
        model: 'black-forest-labs/flux-dev',
        input: {
          prompt: { from: 'prompt' },
          go_fast: { from: 'speed' },
          megapixels: { from: 'resolution', map: { '1K': '1', '2K': '2' } },
        },
      }),
    );
    expect(result.success).toBe(false);
    const issues = result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(issues).toEqual([
      'provider.input.go_fast.from: speed is not an option of this model (nor prompt or images)',
      'provider.input.megapixels.map.4K: no value for resolution=4K',
    ]);
  });

  it('reports a mistake in a field mapping against the form it was meant as', () => {
    const result = modelDefinitionSchema.safeParse(
      withProvider({
        name: 'fal',
        model: 'fal-ai/flux/dev',
        input: {
          prompt: { from: 'prompt', frist: true },
          image_urls: { from: 5 },
          num_images: {},
          seed: { value: 1, from: 'prompt' },
          sync_mode: { value: true, map: { true: 1 } },
          enable_safety_checker: { value: false },
        },
      }),
    );
    const issues = result.success
      ? []
      : result.error.issues.map((i) => ({ path: i.path.join('.'), code: i.code, message: i.message }));
    expect(issues).toEqual([
      {
        path: 'provider.input.prompt',
        code: 'unrecognized_keys',
        message: expect.stringContaining("'frist'"),
      },
      { path: 'provider.input.image_urls.from', code: 'invalid_union', message: expect.any(String) },
      {
        path: 'provider.input.num_images',
        code: 'custom',
        message: 'needs value (a constant) or from (prompt, images or options)',
      },
      {
        path: 'provider.input.seed',
        code: 'custom',
        message: 'has both value and from: a field is a constant (value) or taken from a source (from)',
      },
      { path: 'provider.input.sync_mode.map', code: 'custom', message: 'map goes with from, not with value' },
    ]);
    // A constant may be any JSON value, null and false included.
    const constants = modelDefinitionSchema.parse(
      withProvider({ name: 'fal', model: 'm', input: { a: { value: null }, b: { value: false } } }),
    );
    expect(buildProviderInput(constants.provider!, { prompt: 'p', images: [], options: {} })).toEqual({
      a: null,
      b: false,
    });
  });

  it('refuses an unknown provider and a version outside Replicate', () => {
    const unknown = modelDefinitionSchema.safeParse(
      withProvider({ name: 'midjourney', model: 'x', input: {} }),
    );
    expect(unknown.success).toBe(false);
    expect(unknown.success ? '' : unknown.error.issues[0]!.path.join('.')).toBe('provider.name');
    const version = modelDefinitionSchema.safeParse(
      withProvider({ name: 'fal', model: 'fal-ai/flux/dev', version: 'abc', input: {} }),
    );
    expect(version.success ? [] : version.error.issues.map((i) => i.message)).toEqual([
      'only a replicate model has a version',
    ]);
  });
});
