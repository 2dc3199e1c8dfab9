import { z } from 'zod';
import { ownValue } from './own-value.js';
import { providerBlockIssues, providerBlockSchema } from './provider-mapping.js';
import { routeSchema, routingSchema } from './routes.js';
// zod's messages in the words the service has always used, for whoever parses a definition.
import '../validation/zod-messages.js';

/**
 * The shape of one model in the catalog (the `models` table). The stored
 * definition is the single source of truth for a model: the request validator,
 * the JSON Schema served by GET /v1/models and the price quote are all derived
 * from it.
 */

const enumOption = z.object({
  type: z.literal('enum'),
  values: z.array(z.string().min(1)).min(1),
  default: z.string(),
  /** What each value means, for example `{ "basic": "2K output" }`. */
  descriptions: z.record(z.string(), z.string()).optional(),
  description: z.string(),
});

const integerOption = z.object({
  type: z.literal('integer_enum'),
  values: z.array(z.number().int().positive()).min(1),
  default: z.number().int(),
  unit: z.string().optional(),
  description: z.string(),
});

const booleanOption = z.object({
  type: z.literal('boolean'),
  default: z.boolean(),
  description: z.string(),
});

/** A single image input (HTTPS URL or, where accepted, a data URI). */
const imageOption = z.object({
  type: z.literal('image'),
  /** Another image option that must be present when this one is. */
  requires: z.string().optional(),
  description: z.string(),
});

const modelOptionSchema = z.discriminatedUnion('type', [
  enumOption,
  integerOption,
  booleanOption,
  imageOption,
]);

/**
 * The most credits one request may be quoted, whatever its options (and the most any one price may
 * be): a typing mistake of a few zeros must not reach a balance, and quotes stay far inside the
 * `integer` columns that record them.
 */
export const MAX_QUOTE_CREDITS = 100_000;
const price = z.number().int().nonnegative().max(MAX_QUOTE_CREDITS);

const pricingSchema = z.object({
  /** `generation`: one price per request; `second`: multiplied by the `duration` option. */
  unit: z.enum(['generation', 'second']),
  /** The option whose value selects the base price, or null for a flat price. */
  by: z.string().nullable(),
  /** Credits per unit, keyed by the value of `by` (or `"*"` for a flat price). */
  credits: z.record(z.string(), price),
  /** Extra credits per unit added when an option has a given value, e.g. `{ generate_audio: { "true": 2 } }`. */
  surcharges: z.record(z.string(), z.record(z.string(), price)).default({}),
});

export const modelDefinitionSchema = z
  .object({
    name: z.string().min(1),
    description: z.string(),
    media_type: z.enum(['image', 'video']),
    /** `reject`: unknown body fields are a 400; `ignore`: they are dropped from `input`. */
    unknown_fields: z.enum(['reject', 'ignore']),
    prompt: z.object({ min_length: z.number().int().min(1), max_length: z.number().int().min(1) }),
    /** Most reference images accepted in `images` (0: the field is not accepted). */
    max_images: z.number().int().min(0),
    /** Whether image inputs may be `data:image/<type>;base64,...` as well as HTTPS URLs. */
    accepts_data_uris: z.boolean(),
    options: z.record(z.string(), modelOptionSchema),
    /** Output long edge in pixels, keyed by the value of the option that sets the size. */
    output_size: z
      .object({ by: z.string(), long_edge_px: z.record(z.string(), z.number().int().positive()) })
      .optional(),
    pricing: pricingSchema,
    /**
     * How long a job of this model usually runs at its provider, in seconds (default: 20 for an
     * image model, 180 for a video model): with provider push on, the wait's first fallback read
     * comes only after it (see docs/providers.md).
     */
    expected_run_seconds: z
      .number()
      .positive()
      .max(6 * 3600)
      .optional(),
    /** Which provider runs the model and how the request maps onto its input; absent: the simulated provider. */
    provider: providerBlockSchema.optional(),
    /** Several providers serving the model (instead of `provider`); see routes.ts. */
    routes: z.array(routeSchema).min(1).optional(),
    /** How the routes are ordered for a request (default `order`: catalog order). */
    routing: routingSchema.optional(),
  })
  .superRefine((def, ctx) => {
    for (const [name, option] of Object.entries(def.options)) {
      if (
        (option.type === 'enum' || option.type === 'integer_enum') &&
        !(option.values as unknown[]).includes(option.default)
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['options', name, 'default'],
          message: 'default is not one of values',
        });
      }
      if (
        option.type === 'image' &&
        option.requires &&
        ownValue(def.options, option.requires)?.type !== 'image'
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['options', name, 'requires'],
          message: 'must name an image option',
        });
      }
    }
    const { by, credits, unit } = def.pricing;
    if (by === null) {
      if (!Object.hasOwn(credits, '*'))
        ctx.addIssue({ code: 'custom', path: ['pricing', 'credits'], message: 'a flat price is keyed "*"' });
    } else {
      const option = ownValue(def.options, by);
      if (!option || option.type !== 'enum') {
        ctx.addIssue({ code: 'custom', path: ['pricing', 'by'], message: `${by} is not an enum option` });
      } else {
        for (const value of option.values) {
          if (!Object.hasOwn(credits, value))
            ctx.addIssue({ code: 'custom', path: ['pricing', 'credits', value], message: 'no price' });
        }
      }
    }
    const duration = ownValue(def.options, 'duration');
    if (unit === 'second' && duration?.type !== 'integer_enum') {
      ctx.addIssue({
        code: 'custom',
        path: ['pricing', 'unit'],
        message: 'per-second pricing needs a duration option',
      });
    }
    for (const name of Object.keys(def.pricing.surcharges)) {
      if (!Object.hasOwn(def.options, name))
        ctx.addIssue({ code: 'custom', path: ['pricing', 'surcharges', name], message: 'no such option' });
    }
    const highest = highestQuote(def.pricing, duration?.type === 'integer_enum' ? duration.values : []);
    // A price over the bound on its own is reported where it is (the field's own check).
    if (highest > MAX_QUOTE_CREDITS && allPrices(def.pricing).every((p) => p <= MAX_QUOTE_CREDITS))
      ctx.addIssue({
        code: 'custom',
        path: ['pricing'],
        message: `the dearest request would be quoted ${highest} credits; at most ${MAX_QUOTE_CREDITS} may be`,
      });
    if (def.provider) {
      for (const issue of providerBlockIssues(def.provider, def.options))
        ctx.addIssue({ code: 'custom', path: ['provider', ...issue.path], message: issue.message });
    }
    routeIssues(def, ctx);
  });

/** A routed model's own rules: routes or provider (not both), one route per provider, costs for `cheapest`. */
function routeIssues(
  def: {
    provider?: unknown;
    routes?: Array<z.infer<typeof routeSchema>>;
    routing?: z.infer<typeof routingSchema>;
    options: Parameters<typeof providerBlockIssues>[1];
  },
  ctx: z.RefinementCtx,
): void {
  const routes = def.routes ?? [];
  if (def.provider && routes.length > 0)
    ctx.addIssue({ code: 'custom', path: ['routes'], message: 'give routes or provider, not both' });
  if (def.routing && routes.length === 0)
    ctx.addIssue({ code: 'custom', path: ['routing'], message: 'routing needs routes' });
  const seen = new Set<string>();
  for (const [index, route] of routes.entries()) {
    for (const issue of providerBlockIssues(route.provider, def.options))
      ctx.addIssue({
        code: 'custom',
        path: ['routes', index, 'provider', ...issue.path],
        message: issue.message,
      });
    // A request names routes by provider (`provider.only`/`order`): one route per provider.
    if (seen.has(route.provider.name))
      ctx.addIssue({
        code: 'custom',
        path: ['routes', index, 'provider', 'name'],
        message: `${route.provider.name} has a route already`,
      });
    seen.add(route.provider.name);
    if (def.routing?.policy === 'cheapest' && !route.cost)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', index, 'cost'],
        message: 'cheapest needs every route’s cost',
      });
  }
  if (def.routing?.policy === 'weighted' && routes.every((route) => (route.weight ?? 1) <= 0))
    ctx.addIssue({ code: 'custom', path: ['routes'], message: 'weighted needs a route of weight above 0' });
}

const allPrices = (pricing: z.infer<typeof pricingSchema>): number[] => [
  ...Object.values(pricing.credits),
  ...Object.values(pricing.surcharges).flatMap((s) => Object.values(s)),
];

/** The largest quote the pricing can give: the dearest base, every dearest surcharge, the longest duration. */
function highestQuote(pricing: z.infer<typeof pricingSchema>, durations: readonly number[]): number {
  const dearest = (prices: Record<string, number>) => Math.max(0, ...Object.values(prices));
  const perUnit =
    dearest(pricing.credits) + Object.values(pricing.surcharges).reduce((sum, s) => sum + dearest(s), 0);
  return pricing.unit === 'second' ? perUnit * Math.max(0, ...durations) : perUnit;
}

export type ModelDefinition = z.infer<typeof modelDefinitionSchema>;

export interface CatalogEntry extends ModelDefinition {
  id: string;
}

/** A model's stored definition as a catalog entry; null when there is none or it does not parse. */
export function catalogEntryOf(id: string, definition: unknown): CatalogEntry | null {
  const parsed = modelDefinitionSchema.safeParse(definition);
  return parsed.success ? { id, ...parsed.data } : null;
}
