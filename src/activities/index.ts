import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import type { Provider } from '../providers/provider.js';
import type { Storage } from '../storage/storage.js';
import { createGenerationActivities } from './generation-activities.js';
import { createHealthActivities } from './health-activities.js';
import { createReconciliationActivities } from './reconciliation-activities.js';

export interface ActivityDeps {
  db: CommonQueryMethods;
  providerFor: (model: string) => Provider;
  storage: Storage;
  concurrencyLimit: number;
  /** A Temporal client (connected on first use), for the reconciliation sweep. */
  temporal: () => Promise<Client>;
}

/** Every activity the worker registers, built from its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createHealthActivities(deps),
    ...createGenerationActivities(deps),
    ...createReconciliationActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
