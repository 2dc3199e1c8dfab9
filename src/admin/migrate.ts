import { defaultCatalogSeeds } from '../catalog/seed-catalog.js';
import { applyMigrations, type MigrationResult } from '../db/migrate.js';

/**
 * A database ready for the service: pending migrations applied, then the default catalog's
 * missing models inserted. What `npm run migrate`, `npm start`, the tests and the benchmarks run.
 */
export function migrate(databaseUrl: string): Promise<MigrationResult> {
  return applyMigrations(databaseUrl, defaultCatalogSeeds());
}
