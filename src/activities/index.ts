import type { CommonQueryMethods } from 'slonik';
import { createHealthActivities } from './health-activities.js';

export interface ActivityDeps {
  db: CommonQueryMethods;
}

/** Every activity the worker registers, built from its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createHealthActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
