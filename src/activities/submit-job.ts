import type { CatalogEntry } from '../catalog/catalog-entry.js';
import { ownValue } from '../catalog/own-value.js';
import { resolveOptions } from '../catalog/pricing.js';
import { buildProviderInput } from '../catalog/provider-mapping.js';
import { routesOf, type ModelRoute } from '../catalog/routes.js';
import type { ProviderJob } from '../providers/provider.js';
import { referenceImageFields } from '../providers/reference-images.js';
import type { GenerationStart } from '../workflows/generation-types.js';

/** What a submit attempt sends, and to which route of the generation's plan. */

/**
 * The route at plan position `position` of a generation: its place in the model's routes, and
 * whether a later one follows. A start from before routes has one: the model's first.
 */
export function plannedRoute(
  start: GenerationStart,
  entry: CatalogEntry,
  position: number,
): { route: ModelRoute; index: number; hasNext: boolean } | null {
  const plan = start.routes ?? [{ route: 0, provider: '' }];
  const planned = plan[position];
  const route = planned && routesOf(entry)[planned.route];
  // The catalog changed under the generation so that the route is another provider's: not this plan's route.
  if (!planned || !route || (planned.provider !== '' && planned.provider !== route.provider)) return null;
  return { route, index: planned.route, hasNext: position + 1 < plan.length };
}

/**
 * The job for the provider, built from the request and the catalog entry (a retired model still
 * runs); `webhookUrl`, where the provider should push the job's end (see submit-holding.ts).
 */
export function providerJob(
  start: GenerationStart,
  token: string,
  entry: CatalogEntry,
  route: ModelRoute,
  webhookUrl?: string,
): ProviderJob {
  const options = resolveOptions(entry, start.input);
  const sizeBy = entry.output_size ? String(options[entry.output_size.by]) : '';
  const longEdgePx = (entry.output_size && ownValue(entry.output_size.long_edge_px, sizeBy)) ?? 1024;
  const prompt = typeof start.input.prompt === 'string' ? start.input.prompt : '';
  const images = Array.isArray(start.input.images) ? (start.input.images as string[]) : [];
  const block = route.block;
  const target = block && {
    model: block.model,
    version: block.version,
    input: buildProviderInput(block, { prompt, images, options }),
    referenceFields: referenceImageFields({ options: entry.options, provider: block }),
  };
  return {
    token,
    model: start.model,
    mediaType: start.mediaType,
    prompt,
    options,
    images,
    longEdgePx,
    target,
    generationId: start.generationId,
    workflowId: start.workflowId,
    ...(webhookUrl ? { webhookUrl } : {}),
  };
}
