import type { CompiledModel } from '../../catalog/catalog-cache.js';
import { quotePrice, resolveOptions } from '../../catalog/pricing.js';

/**
 * What a create with this checked body would debit now: the price admission computes (quotePrice
 * over the catalog entry, its defaults filled in). The API's quote and the console's playground
 * show it alike.
 */
export function quoteOf(checked: { model: CompiledModel; input: Record<string, unknown> }): number {
  const { entry } = checked.model;
  return quotePrice(entry, resolveOptions(entry, checked.input));
}
