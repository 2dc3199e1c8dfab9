import { z } from 'zod';
import { migrate } from './migrate.js';

/** `npm run migrate`: applies pending migrations to DATABASE_URL and seeds missing catalog models. */
const env = z.object({ DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//) }).safeParse(process.env);
if (!env.success) {
  process.stderr.write(
    'Invalid configuration:\n  DATABASE_URL: is required (postgres://user:password@host:port/database)\n',
  );
  process.exit(2);
}
const result = await migrate(env.data.DATABASE_URL);
process.stdout.write(
  `Migrations applied: ${result.applied.length ? result.applied.join(', ') : 'none'} ` +
    `(${result.skipped.length} already applied). Models seeded: ${result.seededModels.length ? result.seededModels.join(', ') : 'none'}.\n`,
);
