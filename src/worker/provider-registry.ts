import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import { catalogEntryOf } from '../catalog/catalog-entry.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { routesOf } from '../catalog/routes.js';
import {
  providerCredentialVariables,
  providersWithCredentials,
  type Config,
} from '../config/service-config.js';
import { listActiveModels } from '../db/catalog-repository.js';
import type { Provider } from '../providers/provider.js';

/**
 * The providers this worker can reach, by name: the simulated one always, each real one when its
 * credentials are configured. A job for a provider this worker has no credentials for fails its
 * attempt (retried until the step's horizon): another worker, or this one once configured, may
 * have them, and nothing may be refunded or resubmitted on a guess.
 */
export function providerRegistry(
  config: Config,
  build: Partial<Record<ProviderName, () => Provider>> & { simulated: () => Provider },
  wrap: (name: ProviderName, provider: Provider) => Provider = (_name, provider) => provider,
): { providerFor: (name: ProviderName) => Provider; providers: ReadonlyMap<ProviderName, Provider> } {
  const configured = providersWithCredentials(config);
  const providers = new Map<ProviderName, Provider>();
  for (const name of configured) {
    const make = build[name];
    if (make) providers.set(name, wrap(name, make()));
  }
  const providerFor = (name: ProviderName) => {
    const provider = providers.get(name);
    if (provider) return provider;
    throw new Error(
      `provider ${name} is not configured on this worker (set ${providerCredentialVariables[name] ?? name})`,
    );
  };
  return { providerFor, providers };
}

/**
 * Says once, at start, which catalog models are not offered because their provider has no
 * credentials here (the API leaves them out of GET /v1/models and refuses them at POST).
 */
export async function logUnconfiguredProviders(
  config: Config,
  db: CommonQueryMethods,
  logger: Logger,
): Promise<void> {
  const configured = providersWithCredentials(config);
  const unserved = new Map<ProviderName, string[]>();
  for (const row of await listActiveModels(db)) {
    const entry = catalogEntryOf(row.id, row.definition);
    for (const name of entry ? routesOf(entry).map((route) => route.provider) : ['simulated' as const])
      if (!configured.has(name)) unserved.set(name, [...(unserved.get(name) ?? []), row.id]);
  }
  for (const [name, models] of unserved)
    logger.warn(
      { provider: name, models },
      `provider ${name} has no credentials (${providerCredentialVariables[name]} is not set): its models are not offered`,
    );
}
