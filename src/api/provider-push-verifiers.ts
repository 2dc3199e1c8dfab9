import type { ProviderName } from '../catalog/provider-mapping.js';
import { providersWithCredentials, type Config } from '../config.js';
import { FalWebhookVerifier } from '../providers/fal/fal-webhooks.js';
import type { PushVerifier } from '../providers/provider-webhooks.js';
import { ReplicateWebhookVerifier } from '../providers/replicate/replicate-webhooks.js';

/**
 * The providers whose pushes the API takes, each with its verification: those configured here
 * (their credentials set, as for offering their models). fal's are verified with its public keys
 * (FAL_JWKS_URL); Replicate's with the account's secret, read with REPLICATE_API_TOKEN.
 */
export function providerPushVerifiers(config: Config): ReadonlyMap<ProviderName, PushVerifier> {
  const configured = providersWithCredentials(config);
  const verifiers = new Map<ProviderName, PushVerifier>();
  if (configured.has('fal')) verifiers.set('fal', new FalWebhookVerifier({ jwksUrl: config.FAL_JWKS_URL }));
  if (configured.has('replicate'))
    verifiers.set(
      'replicate',
      new ReplicateWebhookVerifier({ apiUrl: config.REPLICATE_API_URL, token: config.REPLICATE_API_TOKEN! }),
    );
  return verifiers;
}
