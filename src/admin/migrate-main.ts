import { loadMigrateConfig } from '../config/service-config.js';
import { loadOrExit } from '../process/lifecycle.js';
import { migrate } from './migrate.js';

/** `npm run migrate`: applies pending migrations to DATABASE_URL and seeds missing catalog models. */
const { DATABASE_URL } = loadOrExit(loadMigrateConfig);
const result = await migrate(DATABASE_URL);
process.stdout.write(
  `Migrations applied: ${result.applied.length ? result.applied.join(', ') : 'none'} ` +
    `(${result.skipped.length} already applied). Models seeded: ${result.seededModels.length ? result.seededModels.join(', ') : 'none'}.\n`,
);
