import type { Model } from './types.js';

/**
 * The credits a body would cost, from the live catalog entry (GET /v1/models), as the API quotes
 * it: (credits[value of `by`, or "*"] + each matching surcharge) × duration for per-second models.
 * Omitted options take the model's defaults. null when the catalog has no price for the choice.
 */
export function priceOf(model: Model, body: Record<string, unknown>): number | null {
  const value = (name: string): unknown => body[name] ?? model.options[name]?.default;
  const { pricing } = model;
  const base = pricing.credits[pricing.by === null ? '*' : String(value(pricing.by))];
  if (base === undefined) return null;
  let perUnit = base;
  for (const [option, byValue] of Object.entries(pricing.surcharges))
    perUnit += byValue[String(value(option))] ?? 0;
  if (pricing.unit !== 'second') return perUnit;
  const seconds = value('duration');
  return typeof seconds === 'number' ? perUnit * seconds : null;
}

/** The cheapest and dearest request a model takes (every priced choice, every surcharge on or off). */
export function priceRange(model: Model): { min: number; max: number; unit: string } {
  const { pricing } = model;
  const bases = Object.values(pricing.credits);
  const surchargeMax = Object.values(pricing.surcharges).reduce(
    (sum, byValue) => sum + Math.max(0, ...Object.values(byValue)),
    0,
  );
  return { min: Math.min(...bases), max: Math.max(...bases) + surchargeMax, unit: pricing.unit };
}
