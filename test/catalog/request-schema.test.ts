import Ajv2019 from 'ajv/dist/2019.js';
import { describe, expect, it } from 'vitest';
import { compileModel } from '../../src/catalog/catalog-cache.js';
import { modelDefinitionSchema, type CatalogEntry } from '../../src/catalog/catalog-entry.js';
import { defaultCatalog } from '../../src/catalog/default-catalog.js';
import { quotePrice, resolveOptions } from '../../src/catalog/pricing.js';
import { toValidationIssues } from '../../src/catalog/request-schema.js';
import { unstorableTextIssues } from '../../src/validation/storable-text.js';

const entries: CatalogEntry[] = defaultCatalog.map((m) => ({
  id: m.id,
  ...modelDefinitionSchema.parse(m.definition),
}));
const model = (id: string) => compileModel(entries.find((e) => e.id === id)!);
// A real 1×1 PNG: data URIs are checked down to the size in their header.
const png =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const jpegAsPng = `data:image/png;base64,${Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]).toString('base64')}`;

function validate(id: string, body: Record<string, unknown>) {
  const result = model(id).requestSchema.safeParse({ model: id, ...body });
  return result.success
    ? { ok: true as const, input: result.data as Record<string, unknown> }
    : { ok: false as const, issues: toValidationIssues(result.error, { model: id, ...body }) };
}

describe('catalog: the request schema built from each entry', () => {
  it('the default catalog has the models the service promises', () => {
    const lite = entries.filter((e) => e.unknown_fields === 'reject');
    expect(lite.map((e) => e.id)).toEqual(['lumen-lite']);
    expect(lite[0]).toMatchObject({ prompt: { max_length: 3000 }, accepts_data_uris: false });
    expect(Object.keys(lite[0]!.options).sort()).toEqual(['aspect_ratio', 'output_format', 'quality']);
    const k124 = entries.filter(
      (e) =>
        e.media_type === 'image' &&
        e.unknown_fields === 'ignore' &&
        e.options.resolution?.type === 'enum' &&
        e.options.resolution.values.join() === '1K,2K,4K',
    );
    expect(k124.length).toBeGreaterThanOrEqual(2);
    for (const e of k124) expect(e).toMatchObject({ accepts_data_uris: true, prompt: { max_length: 5000 } });
    expect(
      entries.some(
        (e) => e.options.resolution?.type === 'enum' && e.options.resolution.values.join() === '1K,1.5K,2K',
      ),
    ).toBe(true);
    const video = entries.find((e) => e.media_type === 'video')!;
    expect(Object.keys(video.options)).toEqual(
      expect.arrayContaining(['first_frame_image', 'last_frame_image', 'generate_audio', 'duration']),
    );
  });

  it('the lite model rejects unknown fields, naming each; the others drop them', () => {
    expect(validate('lumen-lite', { prompt: 'a cat', seed: 1, style: 'x' })).toEqual({
      ok: false,
      issues: [
        { field: 'seed', code: 'unknown_field', message: expect.any(String) },
        { field: 'style', code: 'unknown_field', message: expect.any(String) },
      ],
    });
    const pro = validate('lumen-pro', { prompt: 'a cat', seed: 1 });
    expect(pro).toEqual({ ok: true, input: { model: 'lumen-pro', prompt: 'a cat' } });
  });

  it('prompt length counts characters (code points): 1–3000 for lite, 1–5000 for the others', () => {
    expect(validate('lumen-lite', { prompt: '🐱'.repeat(3000) }).ok).toBe(true);
    expect(validate('lumen-lite', { prompt: 'a'.repeat(3001) })).toMatchObject({
      ok: false,
      issues: [{ field: 'prompt', code: 'too_big' }],
    });
    expect(validate('lumen-pro', { prompt: 'a'.repeat(5000) }).ok).toBe(true);
    expect(validate('lumen-pro', { prompt: 'a'.repeat(5001) })).toMatchObject({
      ok: false,
      issues: [{ field: 'prompt', code: 'too_big' }],
    });
    expect(validate('lumen-pro', { prompt: '' })).toMatchObject({
      ok: false,
      issues: [{ field: 'prompt', code: 'too_small' }],
    });
    // One character, several characters.
    expect(validate('lumen-pro', { prompt: '' })).toMatchObject({
      issues: [{ message: 'Must be at least 1 character.' }],
    });
    expect(validate('lumen-lite', { prompt: 'a'.repeat(3001) })).toMatchObject({
      issues: [{ message: 'Must be at most 3000 characters.' }],
    });
    expect(validate('lumen-pro', {})).toMatchObject({
      ok: false,
      issues: [{ field: 'prompt', code: 'required' }],
    });
    expect(validate('lumen-pro', { prompt: 42 })).toMatchObject({
      ok: false,
      issues: [{ field: 'prompt', code: 'invalid_type' }],
    });
  });

  it('images: at most max_images; HTTPS only for lite; checked data URIs for the others', () => {
    const url = 'https://images.example/cat.png';
    expect(validate('lumen-lite', { prompt: 'p', images: [url, url, url, url] }).ok).toBe(true);
    expect(validate('lumen-lite', { prompt: 'p', images: [url, url, url, url, url] })).toMatchObject({
      ok: false,
      issues: [{ field: 'images', code: 'too_big' }],
    });
    expect(validate('lumen-lite', { prompt: 'p', images: [png] })).toMatchObject({
      ok: false,
      issues: [{ field: 'images.0', code: 'invalid_image' }],
    });
    expect(validate('lumen-lite', { prompt: 'p', images: ['http://images.example/cat.png'] })).toMatchObject({
      ok: false,
      issues: [{ field: 'images.0' }],
    });
    expect(validate('lumen-pro', { prompt: 'p', images: [url, png] }).ok).toBe(true);
    const bad = validate('lumen-pro', {
      prompt: 'p',
      images: [url, jpegAsPng, 'data:image/png;base64,@@@@', 'ftp://x/y'],
    });
    expect(bad).toMatchObject({ ok: false });
    expect(bad.ok === false && bad.issues.map((i) => i.field)).toEqual(['images.1', 'images.2', 'images.3']);
  });

  it('enumerated options take only catalog values; the video model needs a first frame for a last frame', () => {
    expect(validate('lumen-pro', { prompt: 'p', resolution: '8K' })).toMatchObject({
      ok: false,
      issues: [{ field: 'resolution', code: 'invalid_value' }],
    });
    expect(validate('prism-2', { prompt: 'p', resolution: '1.5K' }).ok).toBe(true);
    expect(validate('lumen-lite', { prompt: 'p', quality: 'ultra', output_format: 'jpeg' }).ok).toBe(true);
    expect(validate('lumen-lite', { prompt: 'p', resolution: '1K' })).toMatchObject({
      ok: false,
      issues: [{ field: 'resolution', code: 'unknown_field' }],
    });
    expect(validate('motion-1', { prompt: 'p', duration: 6, generate_audio: true }).ok).toBe(true);
    expect(validate('motion-1', { prompt: 'p', duration: 5 })).toMatchObject({
      ok: false,
      issues: [{ field: 'duration' }],
    });
    expect(validate('motion-1', { prompt: 'p', last_frame_image: png })).toMatchObject({
      ok: false,
      issues: [{ field: 'last_frame_image', code: 'requires' }],
    });
    expect(validate('motion-1', { prompt: 'p', first_frame_image: png, last_frame_image: png }).ok).toBe(
      true,
    );
  });
});

describe('catalog: prices', () => {
  it('quotes by the priced option, defaults applied', () => {
    const price = (id: string, input: Record<string, unknown>) => {
      const entry = entries.find((e) => e.id === id)!;
      return quotePrice(entry, resolveOptions(entry, input));
    };
    expect(price('lumen-lite', {})).toBe(2);
    expect(price('lumen-lite', { quality: 'ultra' })).toBe(6);
    expect(price('lumen-pro', {})).toBe(4);
    expect(price('lumen-pro', { resolution: '4K' })).toBe(10);
    expect(price('nova-image', {})).toBe(5);
    expect(price('prism-2', { resolution: '1.5K' })).toBe(3);
    expect(price('motion-1', {})).toBe(20); // 720p × 4 s × 5
    expect(price('motion-1', { resolution: '1080p', duration: 8, generate_audio: true })).toBe(80); // (8 + 2) × 8
  });

  it('an entry without a price for one of its values is refused by the catalog schema', () => {
    const broken = structuredClone(defaultCatalog[1]!.definition);
    delete broken.pricing.credits['4K'];
    expect(modelDefinitionSchema.safeParse(broken).success).toBe(false);
  });
});

describe('catalog: the published JSON Schema agrees with the validator', () => {
  // `unicode` patterns, as JSON Schema specifies them (ECMA-262 with the u flag).
  const ajv = new Ajv2019.default({ strict: false, allErrors: true, unicodeRegExp: true });
  const samples: Array<[string, Record<string, unknown>]> = [
    ['lumen-lite', { prompt: 'a cat' }],
    ['lumen-lite', { prompt: 'a cat', quality: 'high', output_format: 'jpeg', aspect_ratio: '16:9' }],
    ['lumen-lite', { prompt: 'a cat', extra: 1 }],
    ['lumen-lite', { prompt: 'a cat', quality: 'max' }],
    ['lumen-lite', { prompt: '' }],
    ['lumen-lite', { prompt: 'x'.repeat(3001) }],
    ['lumen-pro', { prompt: 'a cat', extra: 1, resolution: '2K' }],
    ['lumen-pro', { prompt: 'a cat', images: Array(9).fill('https://x.example/a.png') }],
    ['lumen-pro', { prompt: 'a cat', resolution: '3K' }],
    ['prism-2', { prompt: 'p', resolution: '1.5K' }],
    ['motion-1', { prompt: 'p', duration: 6 }],
    ['motion-1', { prompt: 'p', duration: 7 }],
    ['motion-1', { prompt: 'p', generate_audio: 'yes' }],
    ['nova-image', {}],
    // Image fields: what the server refuses, the published schema refuses.
    ['motion-1', { prompt: 'p', first_frame_image: '' }],
    ['motion-1', { prompt: 'p', first_frame_image: 'https://x.example/a.png' }],
    ['motion-1', { prompt: 'p', first_frame_image: ' https://x.example/a.png' }],
    ['motion-1', { prompt: 'p', first_frame_image: 'https://x.example/a b.png' }],
    ['motion-1', { prompt: 'p', first_frame_image: 'https://x.example/\ta.png' }],
    ['motion-1', { prompt: 'p', first_frame_image: 'http://x.example/a.png' }],
    ['motion-1', { prompt: 'p', first_frame_image: `https://x.example/${'a'.repeat(2048)}` }],
    ['motion-1', { prompt: 'p', first_frame_image: png }],
    ['motion-1', { prompt: 'p', first_frame_image: png.replace('data:image/png', 'data:IMAGE/PNG') }],
    ['motion-1', { prompt: 'p', first_frame_image: png.replace('image/png', 'image/bmp') }],
    ['motion-1', { prompt: 'p', first_frame_image: `${png}=` }],
    ['motion-1', { prompt: 'p', first_frame_image: 'data:image/png;base64,' }],
    ['motion-1', { prompt: 'p', last_frame_image: png }],
    ['motion-1', { prompt: 'p', first_frame_image: png, last_frame_image: png }],
    ['lumen-lite', { prompt: 'p', images: [png] }],
    ['lumen-lite', { prompt: 'p', images: ['https://x.example/a.png'] }],
    ['lumen-pro', { prompt: 'p', images: ['https://x.example/a.png', png, ''] }],
    // Text that cannot be stored, in defined and ignored fields alike.
    ['lumen-pro', { prompt: 'a\u0000b' }],
    ['lumen-pro', { prompt: 'p', 'ignored\u0000': 1 }],
    ['lumen-pro', { prompt: 'controls \u0013 and emoji 😀 are fine' }],
  ];
  const labelled = samples.map(([id, body]) => [id, JSON.stringify(body).slice(0, 120), body] as const);
  it.each(labelled)('%s %s', (id, _label, body) => {
    const compiled = model(id);
    const full = { model: id, ...body };
    // The server's verdict: the model's schema, and the storable-text check every body goes through.
    const byServer =
      compiled.requestSchema.safeParse(full).success && unstorableTextIssues(full).length === 0;
    const byJsonSchema = ajv.validate(compiled.publicView.request_schema, full);
    expect(byJsonSchema).toBe(byServer);
  });
});
