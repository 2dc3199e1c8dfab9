import { providerNames, type ProviderName } from '../catalog/provider-mapping.js';

/**
 * The provider job id a generation records names its provider, so that every later step (the
 * wait, persisting, a cancel, support's resolution) reaches the provider that has the job even if
 * the catalog entry changed since: `fal:<id>`, `replicate:<id>`, `openai:<id>`. The simulated
 * provider's ids stay bare, as every generation before real providers recorded them.
 */
export function jobReference(provider: ProviderName, jobId: string): string {
  return provider === 'simulated' ? jobId : `${provider}:${jobId}`;
}

/** The provider and its own job id behind a recorded job reference. */
export function parseJobReference(reference: string): { provider: ProviderName; jobId: string } {
  const colon = reference.indexOf(':');
  const prefix = colon > 0 ? reference.slice(0, colon) : '';
  if (prefix !== 'simulated' && (providerNames as readonly string[]).includes(prefix))
    return { provider: prefix as ProviderName, jobId: reference.slice(colon + 1) };
  return { provider: 'simulated', jobId: reference };
}
