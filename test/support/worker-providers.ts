import { readFile } from 'node:fs/promises';
import { inject } from 'vitest';
import { parseCatalogFile } from '../../src/catalog/catalog-file.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import type { ProviderName } from '../../src/catalog/provider-mapping.js';
import { loadConfig } from '../../src/config/service-config.js';
import { createLogger } from '../../src/process/logger.js';
import type { Provider } from '../../src/providers/provider.js';
import { activityDeps } from '../../src/worker/worker-deps.js';
import { bearer } from './api.js';
import type { GenerationStack } from './stack.js';
import { waitFor } from './wait.js';

/**
 * The worker's providers as src/worker/worker-deps.ts builds them from this configuration (health
 * tracking included), on the stack's database and storage, with loopback allowed for the provider
 * fakes: what a test hands the stack's worker as its `providerFor`. Call once the stack has started.
 */
export function workerProviders(
  stack: GenerationStack,
  env: Record<string, string>,
): (name: ProviderName) => Provider {
  const config = loadConfig({
    DATABASE_URL: stack.db.url,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    STORAGE_DIR: stack.worker.storageDir,
    RESULT_BASE_URL: stack.worker.resultBaseUrl,
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    ...env,
  });
  return activityDeps(config, stack.db.pool, createLogger('worker-test', 'silent'), {
    temporal: () => Promise.reject(new Error('not used here')),
  }).deps.providerFor;
}

/**
 * Imports catalog example files (`catalog/examples/…`) as an operator would, and waits until the
 * API offers every model in `modelIds` (it hears of the change by NOTIFY).
 */
export async function offerExampleModels(
  stack: GenerationStack,
  files: readonly string[],
  modelIds: readonly string[],
): Promise<void> {
  for (const file of files) {
    const text = await readFile(new URL(`../../${file}`, import.meta.url), 'utf8');
    await importCatalog(stack.db.pool, file, parseCatalogFile(text, file));
  }
  await waitFor(async () => {
    const models = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/models',
      headers: bearer(stack.account.key),
    });
    const offered = models.json<{ data: Array<{ id: string }> }>().data.map((m) => m.id);
    return modelIds.every((id) => offered.includes(id));
  });
}
