import { migrate } from '../admin/migrate.js';
import type { MigrationResult } from '../db/migrate.js';
import {
  startEmbeddedPostgres,
  type EmbeddedPostgresOptions,
  type RunningPostgres,
} from './embedded-postgres.js';

export interface MigratedPostgres extends RunningPostgres {
  /** What migrating `url` did. */
  migration: MigrationResult;
}

/**
 * An embedded PostgreSQL whose database (`options.database`) has every migration applied: what
 * `npm start`, the test run's template database and the benchmarks stand on. Stopped again if the
 * migration fails.
 */
export async function startMigratedPostgres(options: EmbeddedPostgresOptions): Promise<MigratedPostgres> {
  const postgres = await startEmbeddedPostgres(options);
  try {
    return { ...postgres, migration: await migrate(postgres.url) };
  } catch (error) {
    await postgres.stop();
    throw error;
  }
}
