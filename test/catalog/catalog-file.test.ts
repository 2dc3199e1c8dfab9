import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CatalogFileRefused, parseCatalogFile } from '../../src/catalog/catalog-file.js';

/** The example simulated model, to break in one place at a time. */
const sketch = () =>
  structuredClone(
    (JSON.parse(readFileSync('catalog/examples/simulated.json', 'utf8')) as { models: [any] }).models[0],
  );

function problemsOf(models: unknown[]): string[] {
  try {
    parseCatalogFile(JSON.stringify({ models }), 'test.json');
  } catch (error) {
    if (error instanceof CatalogFileRefused) return error.problems;
    throw error;
  }
  return [];
}

describe('checking a catalog file', () => {
  it('reads an entry with its defaults: active, and the definition’s own', () => {
    const entry = sketch();
    delete entry.active;
    const [model] = parseCatalogFile(JSON.stringify({ models: [entry] }), 'test.json');
    expect(model).toMatchObject({ label: 'models[0] "sketch-1"', id: 'sketch-1', active: true });
    expect(model!.definition.pricing.surcharges).toEqual({});
  });

  it('says what is wrong in the words of the file, and which values would do', () => {
    const enumType = sketch();
    enumType.definition.media_type = 'gif';
    enumType.definition.options.size.type = 'choice';
    const typos = sketch();
    typos.id = 'typos';
    typos.definition.options.size.desciption = 'misspelt';
    typos.definition.output_sise = typos.definition.output_size;
    typos.sortorder = typos.sort_order;
    delete typos.sort_order;
    const types = sketch();
    types.id = 'types';
    types.sort_order = '60';
    types.active = 'yes';
    types.definition.max_images = 1.5;
    delete types.definition.name;
    types.definition.provider = { name: 'fal', model: 'fal-ai/flux/dev', input: { image_url: { from: 7 } } };
    const keys = sketch();
    keys.id = 'keys';
    keys.definition.provider = {
      name: 'fal',
      model: 'fal-ai/flux/dev',
      input: { image_size: { from: ['aspect_ratio', 'size'], map: {} } },
    };
    delete keys.definition.pricing.credits.large;
    expect(problemsOf([enumType, typos, types, keys, 'a model', {}])).toEqual([
      'models[0] "sketch-1": definition.media_type: "gif" is not allowed (one of image, video)',
      'models[0] "sketch-1": definition.options.size.type: "choice" is not allowed (one of enum, integer_enum, boolean, image)',
      'models[1] "typos": sort_order: missing',
      'models[1] "typos": sortorder: unknown field',
      'models[1] "typos": definition.options.size.desciption: unknown field',
      'models[1] "typos": definition.output_sise: unknown field',
      'models[2] "types": sort_order: expected a number, got "60"',
      'models[2] "types": active: expected true or false, got "yes"',
      'models[2] "types": definition.name: missing',
      'models[2] "types": definition.max_images: expected a whole number, got 1.5',
      'models[2] "types": definition.provider.input.image_url.from: expected a string or a list, got 7',
      'models[3] "keys": definition.pricing.credits.large: no price',
      ...['1:1', '16:9', '9:16'].flatMap((ratio) =>
        ['small', 'large'].map(
          (size) =>
            `models[3] "keys": definition.provider.input.image_size.map["${ratio},${size}"]: no value for aspect_ratio=${ratio} and size=${size}`,
        ),
      ),
      'models[4]: expected an object, got "a model"',
      'models[5]: id: missing',
      'models[5]: sort_order: missing',
      'models[5]: definition: missing',
    ]);
  });

  it('never takes a value named like an Object.prototype member (constructor, toString) for a priced one', () => {
    const unpriced = sketch();
    unpriced.definition.options.size.values.push('constructor', 'toString');
    unpriced.definition.pricing.surcharges = { toString: { small: 1 } };
    const flat = sketch();
    flat.id = 'flat';
    flat.definition.pricing = { unit: 'generation', by: null, credits: { toString: 1 } };
    flat.definition.options.size.type = 'enum';
    const mapped = sketch();
    mapped.id = 'mapped';
    mapped.definition.options.size.values = ['small', 'constructor'];
    mapped.definition.pricing.credits = { small: 1, constructor: 2 };
    mapped.definition.provider.input = {
      size: { from: 'size', map: { small: 's' } },
      style: { from: 'hasOwnProperty' },
    };
    expect(problemsOf([unpriced, flat, mapped])).toEqual([
      'models[0] "sketch-1": definition.pricing.credits.constructor: no price',
      'models[0] "sketch-1": definition.pricing.credits.toString: no price',
      'models[0] "sketch-1": definition.pricing.surcharges.toString: no such option',
      'models[1] "flat": definition.pricing.credits: a flat price is keyed "*"',
      'models[2] "mapped": definition.provider.input.size.map.constructor: no value for size=constructor',
      'models[2] "mapped": definition.provider.input.style.from: hasOwnProperty is not an option of this model (nor prompt or images)',
    ]);
  });

  it('refuses absurd prices, naming the field', () => {
    const dear = sketch();
    dear.definition.pricing.credits.large = 5_000_000;
    const surcharged = sketch();
    surcharged.id = 'surcharged';
    surcharged.definition.pricing.credits.large = 60_000;
    surcharged.definition.pricing.surcharges = { aspect_ratio: { '16:9': 50_000 } };
    expect(problemsOf([dear, surcharged])).toEqual([
      'models[0] "sketch-1": definition.pricing.credits.large: must be at most 100000, got 5000000',
      'models[1] "surcharged": definition.pricing: the dearest request would be quoted 110000 credits; at most 100000 may be',
    ]);
    const fine = sketch();
    fine.definition.pricing.credits.large = 100_000;
    expect(problemsOf([fine])).toEqual([]);
  });

  it('refuses what is not a catalog file, naming the file', () => {
    const refusal = (text: string) => {
      try {
        parseCatalogFile(text, 'catalog/prices.json');
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refusal('{"models": [')).toMatch(
      /^catalog\/prices\.json: nothing was imported; one problem:\n {2}not JSON: /,
    );
    expect(refusal('[]')).toContain(
      'not a catalog file: expected { "models": [ … ] }; expected an object, got a list',
    );
    expect(refusal('{"models": {}}')).toContain('models: expected a list, got an object');
    expect(refusal('{"model": []}')).toContain('models: missing; model: unknown field');
  });
});
