import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/** Activities the health-check workflow runs: proof that a worker reaches PostgreSQL. */
export function createHealthActivities(deps: { db: CommonQueryMethods }) {
  return {
    async databaseTime(): Promise<string> {
      return deps.db.oneFirst(sql.type(z.object({ now: z.string() }))`SELECT now() AS now`);
    },
  };
}

export type HealthActivities = ReturnType<typeof createHealthActivities>;
