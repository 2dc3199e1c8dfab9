import type { ProviderName } from '../catalog/provider-mapping.js';

/**
 * Where a provider pushes the end of a job (its webhook), and what that push becomes: the API's
 * provider-webhook route (`/provider-webhooks/{provider}/{generationId}`, no API key: the provider's
 * signature is the authentication) verifies it, and signals the generation's workflow
 * (`providerJobEndedSignal`) to read what the job came to. The simulated provider, which lives in
 * the worker, signals the workflow itself.
 */

/** The path of a provider's pushes for one generation, below PROVIDER_WEBHOOK_BASE_URL. */
export const providerWebhookPath = (provider: ProviderName, generationId: string): string =>
  `/provider-webhooks/${provider}/${encodeURIComponent(generationId)}`;

/** The route's pattern (Fastify's), for the API. */
export const providerWebhookRoute = '/provider-webhooks/:provider/:generationId';

/** The URL a job's provider is given at submit, on PROVIDER_WEBHOOK_BASE_URL (the public origin). */
export function providerWebhookUrl(baseUrl: string, provider: ProviderName, generationId: string): string {
  return `${baseUrl.replace(/\/+$/, '')}${providerWebhookPath(provider, generationId)}`;
}
