import { describe, expect, it } from 'vitest';
import { modelDefinitionSchema } from '../../src/catalog/catalog-entry.js';
import { resolveOptions } from '../../src/catalog/pricing.js';
import { buildProviderInput } from '../../src/catalog/provider-mapping.js';
import { planRoutes, routesOf, type ModelRoute } from '../../src/catalog/routes.js';
import { exampleCatalog } from '../support/example-catalog.js';
import { seededRandom } from '../support/seeded-random.js';

/**
 * Issue 29, item 1: a model served by several routes. catalog/examples/routed.json checks as any
 * catalog file does and maps onto the same provider models and inputs as the fal and Replicate
 * examples; each routing policy orders routes as docs/catalog-files.md says, over 100 requests.
 */
describe('routes across providers', () => {
  it('routed.json: flux-schnell on fal first, Replicate second, with the examples’ provider models and inputs', async () => {
    const [routed] = await exampleCatalog('routed');
    const fal = (await exampleCatalog('fal')).find((m) => m.id === 'fal-flux-schnell')!;
    const replicate = (await exampleCatalog('replicate')).find((m) => m.id === 'replicate-flux-schnell')!;
    expect(routed!.id).toBe('flux-schnell');
    const routes = routesOf(routed!.definition);
    expect(routes.map((r) => [r.provider, r.block?.model])).toEqual([
      ['fal', 'fal-ai/flux/schnell'],
      ['replicate', 'black-forest-labs/flux-schnell'],
    ]);
    expect(routed!.definition.routing).toEqual({ policy: 'order' });
    // The customer's price is the model's, as fal's example has it.
    expect(routed!.definition.pricing).toEqual(fal.definition.pricing);
    const request = { prompt: 'a fox', aspect_ratio: '16:9', output_format: 'png' };
    const inputOf = (block: NonNullable<ModelRoute['block']>, definition: typeof fal.definition) =>
      buildProviderInput(block, {
        prompt: 'a fox',
        images: [],
        options: resolveOptions({ id: 'x', ...definition }, request),
      });
    expect(inputOf(routes[0]!.block!, routed!.definition)).toEqual(
      inputOf(fal.definition.provider!, fal.definition),
    );
    expect(inputOf(routes[1]!.block!, routed!.definition)).toEqual(
      inputOf(replicate.definition.provider!, {
        ...replicate.definition,
        options: { ...replicate.definition.options },
      }),
    );
  });

  const route = (provider: ModelRoute['provider'], extra: Partial<ModelRoute> = {}): ModelRoute => ({
    provider,
    weight: 1,
    ...extra,
  });
  const firsts = (routes: ModelRoute[], policy: Parameters<typeof planRoutes>[1], seed = 29) => {
    const random = seededRandom(seed);
    const counts: Record<string, number> = {};
    for (let i = 0; i < 100; i++) {
      const plan = planRoutes(routes, policy, undefined, { random });
      // Every plan holds every route once: the first chosen, the others its fallbacks.
      expect([...plan].sort()).toEqual(routes.map((_, at) => at));
      const first = routes[plan[0]!]!.provider;
      counts[first] = (counts[first] ?? 0) + 1;
    }
    return counts;
  };

  it('order: the catalog’s first route first, every time', () => {
    expect(firsts([route('fal'), route('replicate')], 'order')).toEqual({ fal: 100 });
  });

  it('weighted: the first route drawn by weight (3:1 over 100 requests)', () => {
    const counts = firsts([route('fal', { weight: 3 }), route('replicate', { weight: 1 })], 'weighted');
    expect(counts.fal! + counts.replicate!).toBe(100);
    // 75 expected; a binomial(100, 0.75) lies within ±15 of it but for 1 draw in 3,000.
    expect(counts.fal).toBeGreaterThan(60);
    expect(counts.fal).toBeLessThan(90);
    // Weight 0: never drawn first, still a fallback.
    expect(firsts([route('fal', { weight: 0 }), route('replicate')], 'weighted')).toEqual({ replicate: 100 });
  });

  it('cheapest: the route that costs us least first; fastest: the lowest measured p50 first', () => {
    const routes = [route('fal', { costUsd: 0.004 }), route('replicate', { costUsd: 0.003 })];
    expect(firsts(routes, 'cheapest')).toEqual({ replicate: 100 });
    const p50 = (provider: string) => ({ fal: 900, replicate: 2_500 })[provider];
    expect(planRoutes(routes, 'fastest', undefined, { p50Ms: p50 })).toEqual([0, 1]);
    // Nothing measured: catalog order.
    expect(planRoutes([route('replicate'), route('fal')], 'fastest', undefined)).toEqual([0, 1]);
  });

  it('the request’s provider field: only filters, order puts first, allow_fallbacks false keeps one', () => {
    const routes = [route('fal'), route('replicate'), route('openai')];
    expect(planRoutes(routes, 'order', { only: ['replicate', 'openai'] })).toEqual([1, 2]);
    expect(planRoutes(routes, 'order', { order: ['openai'] })).toEqual([2, 0, 1]);
    expect(planRoutes(routes, 'order', { allow_fallbacks: false })).toEqual([0]);
    // A route whose breaker is open is skipped; without fallbacks the first one down leaves none.
    const usable = (r: ModelRoute) => r.provider !== 'fal';
    expect(planRoutes(routes, 'order', undefined, { usable })).toEqual([1, 2]);
    expect(planRoutes(routes, 'order', { allow_fallbacks: false }, { usable })).toEqual([]);
  });

  it('refuses a definition with both provider and routes, two routes on one provider, or cheapest without costs', async () => {
    const [routed] = await exampleCatalog('routed');
    const definition = routed!.definition;
    const issues = (def: unknown) =>
      modelDefinitionSchema.safeParse(def).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(issues({ ...definition, provider: definition.routes![0]!.provider })).toEqual([
      'routes: give routes or provider, not both',
    ]);
    expect(issues({ ...definition, routes: [definition.routes![0], definition.routes![0]] })).toEqual([
      'routes.1.provider.name: fal has a route already',
    ]);
    expect(
      issues({
        ...definition,
        routing: { policy: 'cheapest' },
        routes: [definition.routes![0], { provider: definition.routes![1]!.provider }],
      }),
    ).toEqual(['routes.1.cost: cheapest needs every route’s cost']);
  });
});
