import { z } from 'zod';
import { providerBlockSchema, providerNames, type ProviderName } from './provider-mapping.js';

/**
 * A model served by several providers (issue 29): its `routes`, each a provider block with what
 * the route costs us and its weight, and the `routing` policy that orders them for a request.
 * The customer's price is the model's whichever route serves it. A model with a single `provider`
 * block (or none: the simulated provider) has one route.
 *
 *   "routes": [
 *     { "provider": { "name": "fal", "model": "fal-ai/flux/schnell", "input": { … } }, "cost": { "usd": 0.003 } },
 *     { "provider": { "name": "replicate", "model": "black-forest-labs/flux-schnell", "input": { … } }, "cost": { "usd": 0.003 } }
 *   ],
 *   "routing": { "policy": "order" }
 */

export const routeSchema = z
  .object({
    provider: providerBlockSchema,
    /** What one request on this route costs us (for `cheapest`), in US dollars. */
    cost: z.object({ usd: z.number().nonnegative() }).strict().optional(),
    /** This route's share under `weighted` (default 1); 0 takes it out of the draw, not of the fallbacks. */
    weight: z.number().nonnegative().optional(),
  })
  .strict();
export type RouteDefinition = z.infer<typeof routeSchema>;

export const routingPolicies = ['order', 'weighted', 'cheapest', 'fastest'] as const;
export type RoutingPolicy = (typeof routingPolicies)[number];
export const routingSchema = z.object({ policy: z.enum(routingPolicies) }).strict();

/** One route of a model, whatever way its entry declares it. */
export interface ModelRoute {
  provider: ProviderName;
  /** The provider block (absent: the simulated provider, which needs none). */
  block?: z.infer<typeof providerBlockSchema>;
  costUsd?: number;
  weight: number;
}

/** A model's routes in catalog order: `routes`, else its one `provider` block, else simulated. */
export function routesOf(entry: {
  provider?: z.infer<typeof providerBlockSchema>;
  routes?: RouteDefinition[];
}): ModelRoute[] {
  if (entry.routes && entry.routes.length > 0)
    return entry.routes.map((route) => ({
      provider: route.provider.name,
      block: route.provider,
      ...(route.cost ? { costUsd: route.cost.usd } : {}),
      weight: route.weight ?? 1,
    }));
  if (entry.provider) return [{ provider: entry.provider.name, block: entry.provider, weight: 1 }];
  return [{ provider: 'simulated', weight: 1 }];
}

/** The request's envelope field `provider`: which providers may serve it, in what order, and whether to fall back. */
export const routeRequestSchema = z
  .object({
    only: z
      .array(z.enum(providerNames))
      .min(1)
      .optional()
      .describe('Only these providers may serve the request.'),
    order: z
      .array(z.enum(providerNames))
      .min(1)
      .optional()
      .describe('Try these providers first, in this order; the model’s other routes follow.'),
    allow_fallbacks: z.boolean().optional().describe('false: only the first route is tried (default true).'),
  })
  .strict();
export type RouteRequest = z.infer<typeof routeRequestSchema>;

/** The request's `provider` field naming providers the model has no route on (field, message). */
export function routeRequestIssues(
  routes: readonly ModelRoute[],
  request: RouteRequest | undefined,
): Array<{ field: string; message: string }> {
  if (!request) return [];
  const served = new Set(routes.map((route) => route.provider));
  const issues: Array<{ field: string; message: string }> = [];
  for (const key of ['only', 'order'] as const)
    for (const [index, name] of (request[key] ?? []).entries())
      if (!served.has(name))
        issues.push({
          field: `provider.${key}.${index}`,
          message: `This model is not served by ${name}. Its providers: ${[...served].join(', ')}.`,
        });
  return issues;
}

/**
 * The routes to try for one request, in order (their positions in `routes`): the model's policy,
 * then the request's `only` (a filter) and `order` (those first), then `allow_fallbacks: false`
 * (the first alone). `usable(route)` says whether a route takes work now (its provider's breaker
 * is closed); a route that does not is left out, after `allow_fallbacks: false` kept the first. `random` draws the weighted choice; `p50Ms`
 * gives the measured median duration per provider for `fastest` (unmeasured ones go last, in
 * catalog order). Pure: the same arguments give the same plan.
 */
export function planRoutes(
  routes: readonly ModelRoute[],
  policy: RoutingPolicy,
  request: RouteRequest | undefined,
  options: {
    usable?: (route: ModelRoute) => boolean;
    random?: () => number;
    p50Ms?: (provider: ProviderName) => number | undefined;
  } = {},
): number[] {
  let plan = orderByPolicy(routes, policy, options.random ?? Math.random, options.p50Ms);
  const only = request?.only;
  if (only) plan = plan.filter((i) => only.includes(routes[i]!.provider));
  const order = request?.order;
  if (order) {
    const rank = (i: number) => {
      const at = order.indexOf(routes[i]!.provider);
      return at === -1 ? order.length : at;
    };
    // Array.prototype.sort is stable: routes of one rank keep the policy's order.
    plan = [...plan].sort((a, b) => rank(a) - rank(b));
  }
  // Without fallbacks the first route is the only one: when it is down, none serves (as OpenRouter has it).
  if (request?.allow_fallbacks === false) plan = plan.slice(0, 1);
  const usable = options.usable;
  return usable ? plan.filter((i) => usable(routes[i]!)) : plan;
}

function orderByPolicy(
  routes: readonly ModelRoute[],
  policy: RoutingPolicy,
  random: () => number,
  p50Ms?: (provider: ProviderName) => number | undefined,
): number[] {
  const positions = routes.map((_, i) => i);
  switch (policy) {
    case 'order':
      return positions;
    case 'cheapest':
      // A route without a cost goes after those with one (sort is stable: catalog order breaks ties).
      return positions.sort((a, b) => (routes[a]!.costUsd ?? Infinity) - (routes[b]!.costUsd ?? Infinity));
    case 'fastest':
      return positions.sort(
        (a, b) => (p50Ms?.(routes[a]!.provider) ?? Infinity) - (p50Ms?.(routes[b]!.provider) ?? Infinity),
      );
    case 'weighted': {
      // The first route drawn by weight, the rest by weight again among those left (fallbacks).
      const left = positions.filter((i) => routes[i]!.weight > 0);
      const never = positions.filter((i) => routes[i]!.weight <= 0);
      const drawn: number[] = [];
      while (left.length > 0) {
        const total = left.reduce((sum, i) => sum + routes[i]!.weight, 0);
        let point = random() * total;
        let pick = left.length - 1;
        for (const [at, i] of left.entries()) {
          point -= routes[i]!.weight;
          if (point < 0) {
            pick = at;
            break;
          }
        }
        drawn.push(...left.splice(pick, 1));
      }
      return [...drawn, ...never];
    }
  }
}
