import { PermanentError } from '../vocabulary/errors.js';
import type { CatalogEntry } from './catalog-entry.js';
import { ownValue } from './own-value.js';

/** Input after validation, with every option's default filled in. */
type ResolvedOptions = Record<string, string | number | boolean | undefined>;

/**
 * The full quoted price of a request, in credits. `options` must hold every
 * priced option (defaults applied), which `resolveOptions` guarantees.
 */
export function quotePrice(entry: CatalogEntry, options: ResolvedOptions): number {
  const { pricing } = entry;
  const key = pricing.by === null ? '*' : String(options[pricing.by]);
  const base = ownValue(pricing.credits, key);
  if (base === undefined) throw new PermanentError(`model ${entry.id} has no price for ${pricing.by}=${key}`);
  let perUnit = base;
  for (const [option, byValue] of Object.entries(pricing.surcharges)) {
    perUnit += ownValue(byValue, String(options[option])) ?? 0;
  }
  if (pricing.unit === 'second') {
    const seconds = options.duration;
    if (typeof seconds !== 'number')
      throw new PermanentError(`model ${entry.id} is priced per second but has no duration`);
    return perUnit * seconds;
  }
  return perUnit;
}

/** The input's options with each omitted option's catalog default filled in. */
export function resolveOptions(entry: CatalogEntry, input: Record<string, unknown>): ResolvedOptions {
  const resolved: ResolvedOptions = {};
  for (const [name, option] of Object.entries(entry.options)) {
    const given = input[name];
    if (option.type === 'image') {
      resolved[name] = typeof given === 'string' ? given : undefined;
    } else {
      resolved[name] = (given as string | number | boolean | undefined) ?? option.default;
    }
  }
  return resolved;
}
