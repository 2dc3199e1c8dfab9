import type { CommonQueryMethods } from 'slonik';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import { ValidationError } from '../../errors.js';
import type { InvalidatedCache } from '../../invalidated-cache.js';
import { principalOf } from '../auth-plugin.js';
import { checkBody } from '../../generations/generation-request.js';
import { quoteOf } from '../../generations/quote.js';
import { checkWebhook, type WebhookCheckRules } from '../../generations/webhook-request.js';
import { routePlanOf } from '../../generations/route-plan.js';
import type { ProviderName } from '../../catalog/provider-mapping.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/**
 * POST /v1/generations/quote: what a create with the same body would debit now, and whether the
 * balance covers it. The body is validated exactly as a create's (the same 400 with its issues),
 * and the price is the one admission computes (quotePrice over the catalog entry with its
 * defaults). Nothing is charged, started, stored or fetched: an invalid quote is not recorded
 * either, since it is no request for a generation.
 */
export function quoteRoutes(
  app: ZodApp,
  deps: {
    db: CommonQueryMethods;
    catalog: CatalogCache;
    balances: InvalidatedCache<string, CreditBalance>;
    /** WEBHOOK_ALLOW_CIDRS and the rest: a create's `webhook` is checked here as a create checks it. */
    webhookRules?: WebhookCheckRules;
    /** Seconds until a down provider is probed again; null when it takes requests. */
    providerDownFor?: (provider: string) => number | null;
    /** The `fastest` policy's measured p50 of a model's route, in ms; undefined: unmeasured. */
    routeP50Ms?: (model: string, provider: string) => number | undefined;
  },
): void {
  app.post(
    '/v1/generations/quote',
    { schema: routeSchemas.quoteGeneration, config: { checksOwnBody: true } },
    async (request) => {
      const accountId = principalOf(request).accountId;
      // A create's body quotes as it is: its `webhook` (an envelope field) is checked, not priced.
      const { webhook, ...modelBody } = isObject(request.body) ? request.body : { webhook: undefined };
      const body = checkBody(deps.catalog, isObject(request.body) ? modelBody : request.body);
      const hook = await checkWebhook(webhook, deps.webhookRules ?? { allowCidrs: [] });
      if (!body.ok || !hook.ok)
        throw new ValidationError([...(body.ok ? [] : body.issues), ...(hook.ok ? [] : hook.issues)]);
      const credits = quoteOf(body);
      // The route a create would try first now (admission plans again when it comes; `weighted` draws anew).
      const { plan } = routePlanOf(body.model.entry, body.routing, {
        offers: (provider) => deps.catalog.offers(provider as ProviderName),
        downFor: (provider) => deps.providerDownFor?.(provider) ?? null,
        p50Ms: deps.routeP50Ms,
      });
      const balance =
        deps.balances.peek(accountId) ??
        (await deps.balances.get(accountId, (id) => getBalance(deps.db, id)));
      return {
        model: body.model.entry.id,
        credits,
        provider: plan[0]?.provider ?? null,
        balance: {
          subscription: balance.subscription_credits,
          one_time: balance.one_time_credits,
          total: balance.credits,
        },
        affordable: balance.credits >= credits,
      };
    },
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
