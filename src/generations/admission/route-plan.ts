import type { CatalogCache } from '../../catalog/catalog-cache.js';
import type { CatalogEntry } from '../../catalog/catalog-entry.js';
import type { ProviderName } from '../../catalog/provider-mapping.js';
import { planRoutes, routeRequestIssues, routesOf, type RouteRequest } from '../../catalog/routes.js';
import type { ValidationIssue } from '../../vocabulary/errors.js';
import type { PlannedRoute } from '../../workflows/generation-types.js';

/** What admission and the quote know of the providers now (part of AdmissionDeps). */
export interface ProviderKnowledge {
  /** Whether this process serves a provider's models (its credentials are configured). */
  catalog: Pick<CatalogCache, 'offers'>;
  /** Seconds until a down provider (breaker open) is probed again; null when it takes requests. */
  providerDownFor?: (provider: string) => number | null;
  /** The weighted routing policy's draw (default Math.random). */
  random?: () => number;
  /** The `fastest` policy's measure: a route's recent p50 in ms, undefined when unmeasured (RouteDurations). */
  routeP50Ms?: (model: string, provider: string) => number | undefined;
}

/**
 * The routes a new generation will try, in order, decided before the debit: the model's policy,
 * the request's `provider` field, and each route's health (a provider whose breaker is open, or
 * that this process does not serve, is skipped). `retryAfterSeconds`, when the plan is empty: when
 * the first of the allowed routes' providers is probed again.
 */
export function routePlanOf(
  entry: CatalogEntry,
  request: RouteRequest | undefined,
  known: ProviderKnowledge,
): { plan: PlannedRoute[]; retryAfterSeconds: number | null } {
  const routes = routesOf(entry);
  const policy = entry.routing?.policy ?? 'order';
  const random = known.random ?? Math.random;
  const offers = (provider: string) => known.catalog.offers(provider as ProviderName);
  const downFor = (provider: string) => known.providerDownFor?.(provider) ?? null;
  const p50Ms = known.routeP50Ms && ((provider: string) => known.routeP50Ms?.(entry.id, provider));
  const allowed = planRoutes(routes, policy, request, { random, ...(p50Ms ? { p50Ms } : {}) });
  const usable = allowed.filter((i) => offers(routes[i]!.provider) && downFor(routes[i]!.provider) === null);
  const plan = usable.map((route) => ({ route, provider: routes[route]!.provider }));
  if (plan.length > 0) return { plan, retryAfterSeconds: null };
  const waits = allowed.map((i) => downFor(routes[i]!.provider)).filter((s): s is number => s !== null);
  // No route is down but none is served here either: as long as a probe takes.
  return { plan, retryAfterSeconds: waits.length > 0 ? Math.min(...waits) : 30 };
}

/**
 * The request's `provider` checked against the model's routes (naming a provider the model has no
 * route on is the request's fault, like a bad option), and the routes it would try now.
 */
export function checkRoutes(
  entry: CatalogEntry,
  request: RouteRequest | undefined,
  known: ProviderKnowledge,
):
  | { ok: false; issues: ValidationIssue[] }
  | { ok: true; plan: PlannedRoute[]; retryAfterSeconds: number | null } {
  const issues = routeRequestIssues(routesOf(entry), request);
  if (issues.length > 0)
    return { ok: false, issues: issues.map((issue) => ({ ...issue, code: 'invalid_value' })) };
  return { ok: true, ...routePlanOf(entry, request, known) };
}
